"""The Part B lab (``python -m coursekit.lab vllm``) without vLLM and without a GPU.

CI has no vLLM, so everything vLLM-specific is read from the record of vLLM 0.26.0's source
(``coursekit/data/vllm-0.26.0-formats.json``, written by ``python -m
coursekit.record_vllm_formats``): the lab's command lines may use only flags recorded there, and
its log parser is tested on lines built from the recorded format strings (the %-fields and
f-string fields filled with sample values, behind vLLM's recorded log prefix), the messages that
tell the two model runners apart included. No timing is asserted; the synthetic latencies
are exact numbers the analysis must give back.
"""

from __future__ import annotations

import json
import re
import shlex
import xml.etree.ElementTree as ET

import pytest

from coursekit import lesson
from coursekit.impl import Implementation
from coursekit.lab import main
from coursekit.lab import vllm as lab
from coursekit.lab import vllm_analysis, vllm_runs

RECORDED = json.loads(vllm_runs.FORMATS.read_text(encoding="ascii"))
FMT = RECORDED["formats"]
PREFIX_FIELDS = {"levelname": "INFO", "asctime": "12-04 08:00:00", "fileinfo": "gpu_model_runner.py", "lineno": 1234}
ENGINE = "(EngineCore pid=4242) "  # what vLLM 0.26.0 puts before its engine process's lines

# Qwen2.5-0.5B's config.json, the fields the lab reads: 24 layers, 2 KV heads of 896/14 = 64.
QWEN05 = {
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "hidden_size": 896,
    "torch_dtype": "bfloat16",
}
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
    fields = fill_fstring(
        FMT["engine_config_fields"]["text"],
        {
            "self.model_config.dtype": dtype,
            "self.cache_config.cache_dtype": kv,
            "self.model_config.enforce_eager": "False",
        },
    )
    return FMT["engine_config"]["text"] % ("0.26.0", fields)


def graph_line(secs, gib, key="graph_capture") -> str:
    return FMT[key]["text"] % (secs, gib)


# --- the record and the commands ---------------------------------------------------------------


def test_the_record_is_vllm_0_26_0_with_file_and_line_for_each_flag_and_format():
    assert RECORDED["vllm_version"] == vllm_runs.VLLM_VERSION == "0.26.0"
    for flag, where in RECORDED["flags"].items():
        assert flag in where["options"] and where["line"] > 0 and where["file"].startswith("vllm/")
    for key, where in FMT.items():
        assert where["text"] and where["line"] > 0, key
    assert RECORDED["cli"]["command"] == ["vllm", "bench", "latency"]


@pytest.mark.parametrize("variant", list(vllm_runs.VARIANTS))
def test_commands_use_only_recorded_flags(variant, tmp_path):
    words = lab.bench_command(variant, "m", 8, 32, 32, str(tmp_path / "r.json"))
    assert words[:3] == RECORDED["cli"]["command"]
    flags = [w for w in words if w.startswith("-")]
    unknown = [f for f in flags if f not in RECORDED["flags"]]
    assert not unknown, (
        f"{variant}: flags not recorded from vLLM 0.26.0's source: {unknown}; "
        "re-record with python -m coursekit.record_vllm_formats"
    )
    if "--compilation-config" in words:
        config = json.loads(words[words.index("--compilation-config") + 1])
        assert set(config) == {RECORDED["cudagraph_modes"]["json_key"]}
        # vLLM reads a string mode as CUDAGraphMode[value.upper()] (recorded validator)
        assert "value.upper()" in RECORDED["cudagraph_modes"]["from_string"]["text"]
        assert config["cudagraph_mode"].upper() in RECORDED["cudagraph_modes"]["members"]
    elif variant == "default":  # the lesson's plain command: no graph flag of its own
        assert words.index("--output-json") == len(words) - 2
    else:
        assert variant == "eager" and "--enforce-eager" in words


def test_dry_run_prints_every_command_with_recorded_flags_only(capsys, tmp_path):
    assert main(["vllm", "run", "--dry-run", "--out", str(tmp_path), "--batch-sizes", "1", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    commands = [line for line in lines if not line.startswith("#")]
    variants = lab.PRESETS["modes"]["variants"]
    assert len(commands) == (len(variants) * 2 * len(lab.DEFAULT_OUTPUT_LENS) * len(vllm_runs.RUNNERS))
    for line in commands:
        words = shlex.split(line.split(" > ")[0])
        assert {w for w in words if w.startswith("--")} <= set(RECORDED["flags"])
        assert words[0] == "env", f"every command starts with its runner's environment: {line!r}"
    assert lines[-1].startswith("# time budget: about ") and "ESTIMATE" in lines[-1]


def _runner_of(line: str) -> str:
    words = shlex.split(line.split(" > ")[0])
    env = words[: words.index("vllm")]
    if "VLLM_USE_V2_MODEL_RUNNER=0" in env:
        assert "-u" not in env
        return "v1"
    assert env[1:3] == ["-u", "VLLM_USE_V2_MODEL_RUNNER"], line
    assert not any(w.startswith("VLLM_USE_V2_MODEL_RUNNER=") for w in env), line
    return "default"


def test_both_runners_are_planned_beside_each_other_by_default(capsys, tmp_path):
    assert main(["vllm", "run", "--dry-run", "--out", str(tmp_path), "--variants", "eager", "--batch-sizes", "1"]) == 0
    commands = [c for c in capsys.readouterr().out.splitlines() if not c.startswith("#")]
    # each configuration's two runs one after the other: default (vLLM's choice), then V1
    assert [_runner_of(c) for c in commands] == ["default", "v1"] * len(lab.DEFAULT_OUTPUT_LENS)
    for a, b in zip(commands[::2], commands[1::2]):
        assert a.split(" vllm ", 1)[1].replace("default-", "v1-") == b.split(" vllm ", 1)[1]
    assert main(["vllm", "run", "--dry-run", "--out", str(tmp_path), "--runners", "v1"]) == 0
    commands = [c for c in capsys.readouterr().out.splitlines() if not c.startswith("#")]
    assert {_runner_of(c) for c in commands} == {"v1"}


def test_the_default_runner_unsets_the_variable_and_v1_pins_it():
    shell = {"PATH": "/bin", "VLLM_USE_V2_MODEL_RUNNER": "1"}  # left in the student's shell
    default, v1 = lab.runner_env("default", shell), lab.runner_env("v1", shell)
    assert "VLLM_USE_V2_MODEL_RUNNER" not in default  # VllmConfig.use_v2_model_runner decides
    assert default["PATH"] == "/bin" and default["NO_COLOR"] == "1"
    # vLLM 0.26.0's envs.py reads VLLM_USE_V2_MODEL_RUNNER with maybe_convert_bool,
    # bool(int(value)): "0" -> False, which VllmConfig.use_v2_model_runner returns as is.
    assert bool(int(v1["VLLM_USE_V2_MODEL_RUNNER"])) is False


@pytest.mark.parametrize("preset", list(lab.PRESETS))
def test_presets_plan_their_models_and_variants_with_a_budget(preset, capsys, tmp_path):
    assert main(["vllm", "run", "--dry-run", "--preset", preset, "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    commands = [c for c in lines if not c.startswith("#")]
    want = lab.PRESETS[preset]
    models = [shlex.split(c)[shlex.split(c).index("--model") + 1] for c in commands]
    assert list(dict.fromkeys(models)) == want["models"]
    runs = lab.plan(want["variants"], want["batch_sizes"], want["output_lens"], want["runners"], want["models"])
    assert len(commands) == len(runs)
    assert lines[-1] == "# " + lab.budget_line(runs)
    assert f"about {lab.estimate_seconds(runs) / 60:.0f} min" in lines[-1]


def test_the_lesson_preset_is_the_lessons_command_and_options_win_over_a_preset(capsys, tmp_path):
    assert lab.PRESETS["lesson"]["models"] == ["Qwen/Qwen2.5-7B-Instruct-AWQ"]
    assert lab.PRESETS["lesson"]["variants"] == ["default", "eager"]
    assert vllm_runs.VARIANTS["default"][1] == []  # the lesson's plain command: no graph flag
    assert lab.PRESETS["small-vs-large"]["models"] == ["Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct-AWQ"]
    assert (
        main(
            [
                "vllm",
                "run",
                "--dry-run",
                "--preset",
                "lesson",
                "--out",
                str(tmp_path),
                "--model",
                "m/small",
                "--runners",
                "default",
            ]
        )
        == 0
    )
    commands = [c for c in capsys.readouterr().out.splitlines() if not c.startswith("#")]
    assert len(commands) == 2 * len(lab.DEFAULT_OUTPUT_LENS)
    assert all("--model m/small " in c and "--enforce-eager" in c for c in commands[2:])


def test_the_budget_is_an_estimate_that_grows_with_the_plan():
    one = lab.plan(["eager"], [1], [32, 160], ["v1"])
    assert lab.estimate_seconds(one) == pytest.approx(
        2 * lab.START_S + 13 * (2 * lab.PREFILL_S + lab.STEP_S * (32 + 160))
    )
    graphs = lab.plan(["default"], [1], [32, 160], ["v1"])
    assert lab.estimate_seconds(graphs) - lab.estimate_seconds(one) == pytest.approx(
        2 * (lab.COMPILE_S + lab.CAPTURE_S)
    )
    assert lab.estimate_seconds(lab.plan(["eager"], [1], [32, 160], list(vllm_runs.RUNNERS))) == pytest.approx(
        2 * lab.estimate_seconds(one)
    )


# --- the parser on format-derived text ---------------------------------------------------------


def test_the_recorded_prefix_is_the_one_vllm_prints():
    assert prefix("hello") == "INFO 12-04 08:00:00 [gpu_model_runner.py:1234] hello"


# (recorded key, the values for its %-fields, parse_log's key, what it must give)
CASES = [
    ("model_loading", ("0.93", 3.25), "model_loading", {"gib": 0.93, "secs": 3.25}),
    ("model_loading_v2", ("0.93", 3.25), "model_loading", {"gib": 0.93, "secs": 3.25}),
    ("kv_cache_memory", ("17.25",), "kv_cache_memory", {"gib": 17.25}),
    ("kv_cache_tokens", (f"{1507328:,}",), "kv_cache_tokens", 1507328),
    ("max_concurrency", (f"{2048:,}", 736.0), "max_concurrency", {"tokens_per_request": 2048, "times": 736.0}),
    ("graph_memory_estimate", (0.31,), "graph_memory_estimate", {"gib": 0.31}),
    ("graph_capture", (12.4, 0.3), "graph_capture", {"secs": 12.0, "gib": 0.3}),
    ("graph_capture_v2", (7, 0.25), "graph_capture", {"secs": 7.0, "gib": 0.25}),
    ("graph_pool_memory", (0.3, 0.31, 0.01, 3.3), "graph_pool_memory", {"actual": 0.3, "estimated": 0.31}),
    ("graph_capture_skipped", (), "graph_capture_skipped", True),
    ("enforce_eager", (), "enforce_eager", True),
]


@pytest.mark.parametrize("key, values, parsed, expected", CASES, ids=[c[0] for c in CASES])
def test_parser_reads_each_recorded_format(key, values, parsed, expected):
    message = FMT[key]["text"] % values if values else FMT[key]["text"]
    for line in (prefix(message), ENGINE + prefix(message)):
        facts = vllm_runs.parse_log(f"{prefix('something else')}\n{line}\n")
        assert facts.get(parsed) == expected, f"{key}: from {line!r} expected {expected!r}, got {facts.get(parsed)!r}"


@pytest.mark.parametrize("key", [k for k in FMT if k.startswith("mode_changed_")])
def test_parser_sees_vllm_change_the_graph_mode(key):
    mode = key.removeprefix("mode_changed_").upper()
    message = "CUDAGraphMode.FULL is not supported with X backend (support: Y)" + FMT[key]["text"]
    assert vllm_runs.parse_log(prefix(message))["mode_changed"] == {"mode": mode}


def test_parser_reads_the_engine_config_line():
    facts = vllm_runs.parse_log(prefix(engine_config()))
    assert facts["engine_config"] == {"version": "0.26.0", "dtype": "bfloat16", "kv_dtype": "auto"}


def test_parser_reads_the_benchmark_printout():
    avg = fill_fstring(FMT["bench_avg_latency"]["text"], {"np.mean(latencies)": 0.7})
    lines = [
        fill_fstring(FMT["bench_percentile"]["text"], {"percentage": p, "percentile": p / 100})
        for p in RECORDED["latency_json"]["percentiles"]
    ]
    facts = vllm_runs.parse_log("\n".join(["Warming up...", avg, *lines]))
    assert facts["bench_avg_latency"] == {"secs": 0.7}
    assert facts["bench_percentiles"][50] == 0.5
    assert vllm_runs.latency_seconds(None, facts) == 0.5  # the median before the average
    del facts["bench_percentiles"]
    assert vllm_runs.latency_seconds(None, facts) == 0.7  # the average when no median was logged


def test_latency_json_keys_are_the_recorded_ones():
    keys = RECORDED["latency_json"]["keys"]
    data = {keys[0]: 0.7, keys[1]: [0.6, 0.8], keys[2]: {"50": 0.65}}
    assert vllm_runs.latency_seconds(json.dumps(data), {}) == 0.65
    assert vllm_runs.latency_seconds(json.dumps({keys[0]: 0.7}), {}) == 0.7


def test_ansi_colour_and_progress_bars_do_not_hide_a_line():
    line = "\x1b[32mINFO\x1b[0m \x1b[90m12-04 08:00:00\x1b[0m " + FMT["kv_cache_tokens"]["text"] % ("1,000",)
    facts = vllm_runs.parse_log("Capturing CUDA graphs: 50%|#####\r" + line)
    assert facts["kv_cache_tokens"] == 1000


# --- which model runner ran, from the log ------------------------------------------------------


def v1_lines() -> list[str]:
    return [
        ENGINE + prefix(FMT["model_loading"]["text"] % ("0.93", 3.2)),
        ENGINE + prefix(FMT["graph_memory_estimate"]["text"] % (0.31,)),
    ]


def v2_lines() -> list[str]:
    return [ENGINE + prefix(FMT["runner_v2"]["text"]), ENGINE + prefix(FMT["model_loading_v2"]["text"] % ("0.93", 3.2))]


def test_the_log_tells_v1_from_v2():
    v1 = vllm_runs.parse_log("\n".join(v1_lines()))
    assert v1["runner"] == "V1" and v1["model_loading"] == {"gib": 0.93, "secs": 3.2}
    v2 = vllm_runs.parse_log("\n".join(v2_lines()))
    assert v2["runner"] == "V2" and v2["model_loading"] == {"gib": 0.93, "secs": 3.2}
    assert "graph_memory_estimate" not in v2
    # each message alone is enough
    assert vllm_runs.parse_log(prefix(FMT["runner_v2"]["text"]))["runner"] == "V2"
    assert vllm_runs.parse_log(prefix(FMT["model_loading_v2"]["text"] % ("1", 2.0)))["runner"] == "V2"
    assert vllm_runs.parse_log(prefix(FMT["model_loading"]["text"] % ("1", 2.0)))["runner"] == "V1"
    for key, values in (
        ("graph_estimate_applied_enabled", (0.9, 0.8875, 0.9125)),
        ("graph_estimate_applied_disabled", (0.9, 0.9125)),
    ):
        assert vllm_runs.parse_log(prefix(FMT[key]["text"] % values))["runner"] == "V1", key
    assert "runner" not in vllm_runs.parse_log(prefix(FMT["kv_cache_memory"]["text"] % ("17.6",)))
    both = vllm_runs.parse_log("\n".join(v1_lines() + v2_lines()))
    assert both["runner"] == "V1 and V2"


@pytest.mark.parametrize(
    "line, why",
    [
        (FMT["runner_v2_declined_triton"]["text"], "requires Triton"),
        (FMT["runner_v2_declined_unsupported"]["text"] % "prompt embeds", "does not yet support prompt embeds"),
    ],
)
def test_the_log_says_when_vllm_declines_v2(line, why):
    facts = vllm_runs.parse_log(prefix(line) + "\n" + prefix(FMT["model_loading"]["text"] % ("1", 2.0)))
    assert facts["runner"] == "V1" and facts["runner_v2_declined"] == {"why": why}


# --- a whole synthetic run ---------------------------------------------------------------------

#: ms per decode step by variant and batch size; prefill 20 ms; KV tokens and graph GiB.
STEP_MS = {
    "default": {1: 3.1, 8: 4.05},
    "eager": {1: 12.0, 8: 14.0},
    "none": {1: 8.0, 8: 9.5},
    "piecewise": {1: 5.0, 8: 6.0},
    "full_decode_only": {1: 3.0, 8: 4.0},
    "full_and_piecewise": {1: 3.2, 8: 4.1},
}
KV_TOKENS = {
    "default": 1_505_000,
    "eager": 1_540_000,
    "none": 1_539_000,
    "piecewise": 1_515_000,
    "full_decode_only": 1_510_000,
    "full_and_piecewise": 1_500_000,
}
GRAPH_GIB = {"default": 0.40, "piecewise": 0.25, "full_decode_only": 0.30, "full_and_piecewise": 0.45}


#: The V2 runner reserves no graph memory before it sizes the KV cache: its graph variants keep
#: the baseline's KV tokens (vllm/v1/worker/gpu/model_runner.py:705-707 returns 0). Its steps are
#: made a little shorter, so that a mix-up of the runners shows in the decode times.
V2_FACTOR = 0.9


#: The "big" model of the small-vs-large tests: the same launches, 8 ms more compute per step.
BIG_EXTRA_MS = 8.0


def step_ms(variant, batch, runner="v1", model=None) -> float:
    return STEP_MS[variant][batch] * (V2_FACTOR if runner == "default" else 1.0) + (
        BIG_EXTRA_MS if model == "m/big" else 0.0
    )


def synthetic_log(variant: str, latency_s: float, runner: str = "v1", with_estimate: bool = True) -> str:
    v2 = runner == "default"
    kv_tokens = KV_TOKENS["none"] if v2 and variant in GRAPH_GIB else KV_TOKENS[variant]
    lines = [prefix(engine_config())]
    if variant == "eager":
        lines.append(prefix(FMT["enforce_eager"]["text"]))
    if v2:
        lines.append(ENGINE + prefix(FMT["runner_v2"]["text"]))
    lines += [
        ENGINE + prefix(FMT["model_loading_v2" if v2 else "model_loading"]["text"] % ("0.93", 3.2)),
        ENGINE + prefix(FMT["kv_cache_memory"]["text"] % ("17.6",)),
        prefix(FMT["kv_cache_tokens"]["text"] % (f"{kv_tokens:,}",)),
        prefix(FMT["max_concurrency"]["text"] % ("2,048", kv_tokens / 2048)),
    ]
    if variant in GRAPH_GIB:
        if not v2 and with_estimate:  # V1 only: V2's profile_cudagraph_memory returns 0
            lines.append(ENGINE + prefix(FMT["graph_memory_estimate"]["text"] % (GRAPH_GIB[variant],)))
        lines += [
            "Capturing CUDA graphs (decode, FULL): 100%|##########| 67/67\r",
            ENGINE + prefix(graph_line(9, GRAPH_GIB[variant], "graph_capture_v2" if v2 else "graph_capture")),
        ]
    elif variant == "none":
        lines.append(ENGINE + prefix(FMT["graph_capture_skipped"]["text"]))
    lines += ["Warming up...", fill_fstring(FMT["bench_avg_latency"]["text"], {"np.mean(latencies)": latency_s})]
    return "\n".join(lines) + "\n"


def write_folder(
    folder,
    variants=tuple(STEP_MS),
    with_config=True,
    with_json=True,
    runners=("v1",),
    models=(None,),
    with_estimate=True,
):
    runs = lab.plan(list(variants), [1, 8], [32, 160], list(runners), list(models))
    (folder / "runs").mkdir(parents=True)
    keys = RECORDED["latency_json"]["keys"]
    for run in runs:
        ms = step_ms(run["variant"], run["batch_size"], run["runner"], run.get("model"))
        latency = (20.0 + (run["output_len"] - 1) * ms) / 1e3
        (folder / run["log"]).write_text(
            synthetic_log(run["variant"], latency, run["runner"], with_estimate), encoding="utf-8"
        )
        if with_json:
            (folder / run["json"]).write_text(
                json.dumps({keys[0]: latency, keys[1]: [latency], keys[2]: {"50": latency}})
            )
        run["returncode"] = 0
    manifest = {
        "lab": "vllm_lab",
        "vllm": "0.26.0",
        "gpu": "NVIDIA GeForce RTX 4090 (synthetic)",
        "input_len": 32,
        "variants": list(variants),
        "runners": list(runners),
        "runs": runs,
    }
    if models == (None,):
        manifest["model"] = "Qwen/Qwen2.5-0.5B-Instruct"
    else:
        manifest["models"] = list(models)
    (folder / vllm_runs.MANIFEST).write_text(json.dumps(manifest))
    if with_config:
        for model in models:
            name = vllm_runs.MODEL_CONFIG if model is None else vllm_runs.model_config_name(model)
            (folder / name).write_text(json.dumps(QWEN05))
    return folder


def test_analyze_recovers_the_decode_times_tau_eff_and_kv_tokens(tmp_path, solutions):
    record = vllm_analysis.analyze(write_folder(tmp_path / "run"), solutions)
    assert [(g["model"], g["runner"], g["runner_ran"]) for g in record["groups"]] == [
        ("Qwen/Qwen2.5-0.5B-Instruct", "v1", "V1")
    ]
    group = vllm_analysis.group_of(record)
    for variant, steps in STEP_MS.items():
        got = group["variants"][variant]["decode_ms"]
        assert got == pytest.approx({str(b): ms for b, ms in steps.items()}), variant
    assert group["kernels_per_step"] == K_ESTIMATE
    assert "ESTIMATE" in group["kernels_per_step_source"]
    assert group["baseline"] == "none"  # same compiled kernels: only the graphs differ
    for variant in vllm_runs.GRAPH_VARIANTS:
        for b in (1, 8):
            expected = (STEP_MS["none"][b] - STEP_MS[variant][b]) * 1e3 / (K_ESTIMATE - 1)
            assert group["tau_eff_us"][variant][str(b)] == pytest.approx(expected)
    assert record["tau_us"] == lesson.H200_TAU_EAGER_US
    assert group["kv_bytes_per_token"] == PER_TOKEN
    for variant, gib in GRAPH_GIB.items():
        row = group["kv_tokens_forgone"][variant]
        assert row["from_graph_memory"] == round(gib * 1024**3) // PER_TOKEN
        assert row["measured"] == KV_TOKENS["none"] - KV_TOKENS[variant]  # tau_eff's baseline
    assert group["variants"]["piecewise"]["graph_capture_s"] == 9
    assert group["variants"]["none"]["graph_skipped"] is True


def test_analyze_writes_json_and_svg(tmp_path, capsys):
    folder = write_folder(tmp_path / "run")
    assert main(["vllm", "analyze", str(folder), "--impl", "solutions", "--kernels-per-step", "300"]) == 0
    out = capsys.readouterr().out
    assert "given (--kernels-per-step)" in out and "wrote" in out
    record = json.loads((folder / vllm_runs.RESULT_JSON).read_text())
    assert vllm_analysis.group_of(record)["kernels_per_step"] == 300
    svg = ET.parse(folder / vllm_runs.RESULT_SVG).getroot()
    names = {g.get("data-name") for g in svg.iter("{http://www.w3.org/2000/svg}g")}
    assert {
        "(a) decode step time",
        "(b) speedup over --enforce-eager",
        "(c) tau_eff: µs per launch the graphs removed",
    } <= names


def test_without_the_json_the_log_s_printout_is_used(tmp_path, solutions):
    record = vllm_analysis.analyze(write_folder(tmp_path / "run", with_json=False), solutions)
    eager = vllm_analysis.group_of(record)["variants"]["eager"]
    assert eager["decode_ms"]["1"] == pytest.approx(12.0)


def test_eager_is_the_baseline_when_none_was_not_run(tmp_path, solutions):
    variants = ("eager", "full_decode_only")
    record = vllm_analysis.analyze(write_folder(tmp_path / "run", variants), solutions, kernels=301)
    group = vllm_analysis.group_of(record)
    assert group["baseline"] == "eager"
    assert group["tau_eff_us"]["full_decode_only"]["1"] == pytest.approx(9.0e3 / 300)
    measured = group["kv_tokens_forgone"]["full_decode_only"]["measured"]
    assert measured == KV_TOKENS["eager"] - KV_TOKENS["full_decode_only"]


def test_tau_from_a_launch_tax_json_is_fitted_by_exercise_1(tmp_path, solutions):
    own = tmp_path / "launch-tax.json"
    own.write_text(lesson.H200_ANCHOR.read_text())
    record = vllm_analysis.analyze(write_folder(tmp_path / "run"), solutions, tau_from=own)
    assert record["tau_us"] == pytest.approx(lesson.H200_TAU_EAGER_US, rel=1e-6)
    assert str(own) in record["tau_source"]


def test_a_bad_tau_from_file_is_named_as_tau_from(tmp_path, solutions):
    bad = tmp_path / "launch-tax.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match=r"^--tau-from: .*not a launch-tax measurement"):
        vllm_analysis.analyze(write_folder(tmp_path / "run"), solutions, tau_from=bad)
    with pytest.raises(ValueError, match=r"^--tau-from: cannot read "):
        vllm_analysis.analyze(tmp_path / "run", solutions, tau_from=tmp_path / "missing.json")


def test_unfinished_exercises_leave_their_figures_out_and_say_so(tmp_path, capsys):
    folder = write_folder(tmp_path / "run")
    assert main(["vllm", "analyze", str(folder)]) == 0  # exercises/: the stubs
    out = capsys.readouterr().out
    assert "exercise 1 is not finished" in out and "exercise 9 is not finished" in out
    record = json.loads((folder / vllm_runs.RESULT_JSON).read_text())
    group = vllm_analysis.group_of(record)
    assert "tau_eff_us" not in group and "kv_tokens_forgone" not in group
    assert (folder / vllm_runs.RESULT_SVG).is_file()


# --- refusals and bad input --------------------------------------------------------------------


def test_run_refuses_without_cuda_or_vllm_in_one_line(tmp_path, capsys):
    if lab.refusal() is None:
        pytest.skip("this machine has CUDA and vLLM 0.26.0")
    assert main(["vllm", "run", "--out", str(tmp_path / "out")]) == 1
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


@pytest.mark.parametrize(
    "argv, named",
    [
        (["run", "--batch-sizes", "0"], "--batch-sizes"),
        (["run", "--output-lens", "32"], "--output-lens"),
        (["run", "--output-lens", "32", "64", "--max-model-len", "64"], "--max-model-len"),
        (["run", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
        (["run", "--gpu-memory-utilization", "0"], "--gpu-memory-utilization"),
        (["run", "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
        (["run", "--variants", "full"], "--variants"),
        (["run", "--runners", "v2"], "--runners"),
        (["run", "--preset", "quick"], "--preset"),
        (["run", "--model", "-x"], "--model"),
        (["analyze", "FOLDER", "--kv-shape", "24,2,64"], "--kv-shape"),
        (["analyze", "FOLDER", "--kernels-per-step", "-3"], "--kernels-per-step"),
    ],
)
def test_bad_input_names_the_argument(argv, named, capsys):
    assert main(["vllm", *argv, "--dry-run"] if argv[0] == "run" else ["vllm", *argv]) == 2
    assert named in capsys.readouterr().err


def test_a_folder_that_is_not_a_run_is_named(tmp_path, capsys):
    assert main(["vllm", "analyze", str(tmp_path), "--impl", "solutions"]) == 2
    err = capsys.readouterr().err
    assert "FOLDER" in err and "runs.json" in err and "Traceback" not in err


def test_without_a_model_config_kv_shape_is_asked_for(tmp_path, capsys, solutions):
    folder = write_folder(tmp_path / "run", with_config=False)
    assert main(["vllm", "analyze", str(folder), "--impl", "solutions"]) == 2
    assert "--kv-shape" in capsys.readouterr().err
    record = vllm_analysis.analyze(
        folder, solutions, kernels=300, shape={"n_layers": 24, "n_kv_heads": 2, "head_dim": 64, "dtype_bytes": 2}
    )
    assert vllm_analysis.group_of(record)["kv_bytes_per_token"] == PER_TOKEN


def test_help_says_nothing_has_run_on_a_gpu(capsys):
    assert main(["vllm", "--help"]) == 0
    out = capsys.readouterr().out
    assert "nothing of this lab has run on a GPU" in out and "ESTIMATE" in out


def test_run_wiring_with_a_stand_in_for_vllm(tmp_path, monkeypatch, capsys):
    """``run`` end to end with vLLM replaced: each command's log and JSON land where the manifest
    says, each runner gets its environment (the default runner's without the variable, even when
    the shell has it), and the analysis reads them back apart (the subprocess is faked, nothing is
    timed)."""
    import torch

    def fake_run(command, stdout, stderr, env, timeout):
        variant = (
            next(v for v, (_, flags) in vllm_runs.VARIANTS.items() if flags and flags[-1] == command[-1])
            if command[-1].startswith(("--enforce", "{"))
            else "default"
        )
        runner = "v1" if env.get("VLLM_USE_V2_MODEL_RUNNER") == "0" else "default"
        assert runner == "v1" or "VLLM_USE_V2_MODEL_RUNNER" not in env
        batch = int(command[command.index("--batch-size") + 1])
        out_len = int(command[command.index("--output-len") + 1])
        latency = (20.0 + (out_len - 1) * step_ms(variant, batch, runner)) / 1e3
        stdout.write(synthetic_log(variant, latency, runner))
        with open(command[command.index("--output-json") + 1], "w") as f:
            json.dump({"avg_latency": latency, "percentiles": {"50": latency}}, f)
        assert env["NO_COLOR"] == "1"
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(lab, "refusal", lambda: None)
    monkeypatch.setattr(lab.subprocess, "run", fake_run)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "stand-in GPU")
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")  # left in the student's shell
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / vllm_runs.MODEL_CONFIG).write_text(json.dumps(QWEN05))  # as if saved by transformers
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)  # config not refetched
    assert (
        main(
            [
                "vllm",
                "run",
                "--out",
                str(folder),
                "--batch-sizes",
                "1",
                "8",
                "--variants",
                "eager",
                "full_decode_only",
                "--impl",
                "solutions",
            ]
        )
        == 0
    )
    record = json.loads((folder / vllm_runs.RESULT_JSON).read_text())
    assert record["gpu"] == "stand-in GPU"
    manifest = json.loads((folder / vllm_runs.MANIFEST).read_text())
    assert manifest["runners"] == ["default", "v1"]
    assert {r["runner"] for r in manifest["runs"]} == {"default", "v1"}
    assert manifest["runner_env"]["v1"]["set"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert manifest["runner_env"]["default"]["unset"] == ["VLLM_USE_V2_MODEL_RUNNER"]
    for runner, ran, factor in (("v1", "V1", 1.0), ("default", "V2", V2_FACTOR)):
        group = vllm_analysis.group_of(record, runner=runner)
        assert group["runner_ran"] == ran
        assert group["variants"]["full_decode_only"]["decode_ms"] == pytest.approx(
            {"1": 3.0 * factor, "8": 4.0 * factor}
        )


# --- the runners kept apart ----------------------------------------------------------------------


def test_analyze_keeps_the_runners_apart_and_says_which_ran(tmp_path, solutions, capsys):
    folder = write_folder(tmp_path / "run", runners=("default", "v1"))
    record = vllm_analysis.analyze(folder, solutions)
    assert [(g["runner"], g["runner_ran"]) for g in record["groups"]] == [("default", "V2"), ("v1", "V1")]
    v2, v1 = (vllm_analysis.group_of(record, runner="default"), vllm_analysis.group_of(record, runner="v1"))
    for variant in STEP_MS:
        assert v1["variants"][variant]["decode_ms"]["1"] == pytest.approx(STEP_MS[variant][1])
        assert v2["variants"][variant]["decode_ms"]["1"] == pytest.approx(STEP_MS[variant][1] * V2_FACTOR)
    # V2: no estimate in its log, and none expected; V1: the estimate, subtracted before the KV
    assert v2["variants"]["piecewise"]["graph_estimate_gib"] is None
    assert v1["variants"]["piecewise"]["graph_estimate_gib"] == GRAPH_GIB["piecewise"]
    assert v2["graph_reserve"].startswith("V2 reserves none")
    assert v1["graph_reserve"].startswith("V1 subtracts its estimate")
    assert v2["kv_tokens_forgone"]["piecewise"]["measured"] == 0  # nothing reserved
    assert not record["notes"], record["notes"]  # a V2 run without the estimate is no error
    assert main(["vllm", "analyze", str(folder), "--impl", "solutions"]) == 0
    out = capsys.readouterr().out
    titles = [line for line in out.splitlines() if line.startswith("== ")]
    assert "runner default (vLLM's own choice" in titles[0] and "ran: V2 (from " in titles[0]
    assert "V2: 'Using V2 Model Runner'" in titles[0]
    assert "runner v1 (V1 pinned" in titles[1] and "ran: V1 (from " in titles[1]
    assert "V1: 'Estimated CUDA graph memory'" in titles[1]
    assert "V2 reserves none" in out and "vLLM's estimate -> none (V2 reserves none)" in out
    assert "Runners side by side (default | v1)" in out
    side = next(
        line for line in out.splitlines() if line.strip().startswith("piecewise") and "KV " in line and " | " in line
    )
    assert f"KV {KV_TOKENS['none']:,} | {KV_TOKENS['piecewise']:,}" in side


def test_a_v1_graph_run_without_its_estimate_is_named(tmp_path, solutions):
    record = vllm_analysis.analyze(
        write_folder(tmp_path / "run", runners=("default", "v1"), with_estimate=False), solutions
    )
    named = [n for n in record["notes"] if "Estimated CUDA graph memory" in n]
    assert named and all("runner v1" in n for n in named)
    assert len(named) == len(GRAPH_GIB)


def test_a_runner_other_than_asked_is_named(tmp_path, solutions):
    folder = write_folder(tmp_path / "run", variants=("eager", "piecewise"))
    manifest = json.loads((folder / vllm_runs.MANIFEST).read_text())
    for run in manifest["runs"]:  # the V1 pin's logs now read as V2's
        log = folder / run["log"]
        log.write_text(synthetic_log(run["variant"], 0.5, "default"))
    record = vllm_analysis.analyze(folder, solutions)
    assert any("asked for V1, but the log says V2 ran" in n for n in record["notes"])


def test_a_folder_from_before_the_runners_is_read_as_v1(tmp_path, solutions):
    folder = write_folder(tmp_path / "run", variants=("eager", "none"))
    manifest = json.loads((folder / vllm_runs.MANIFEST).read_text())
    for run in manifest["runs"]:
        del run["runner"]
    del manifest["runners"]
    manifest["env"] = {"VLLM_USE_V2_MODEL_RUNNER": "0", "NO_COLOR": "1"}
    (folder / vllm_runs.MANIFEST).write_text(json.dumps(manifest))
    record = vllm_analysis.analyze(folder, solutions)
    assert record["runners"] == ["v1"] and vllm_analysis.group_of(record)["runner_ran"] == "V1"


# --- small against large -------------------------------------------------------------------------


def test_the_speedup_per_model_is_side_by_side(tmp_path, solutions, capsys):
    folder = write_folder(
        tmp_path / "run", variants=("default", "eager"), runners=("default", "v1"), models=("m/small", "m/big")
    )
    record = vllm_analysis.analyze(folder, solutions)
    assert [(g["model"], g["runner"]) for g in record["groups"]] == [
        ("m/small", "default"),
        ("m/small", "v1"),
        ("m/big", "default"),
        ("m/big", "v1"),
    ]
    row = record["speedup_by_model"]["v1"]["default"]["1"]
    assert row["m/small"] == pytest.approx(12.0 / 3.1)
    assert row["m/big"] == pytest.approx(20.0 / 11.1)
    assert row["m/small"] > row["m/big"]  # smaller compute, bigger gain from graphs
    assert main(["vllm", "analyze", str(folder), "--impl", "solutions"]) == 0
    out = capsys.readouterr().out
    assert "Speedup over eager per model, side by side (small | big)" in out
    assert f"small {12.0 / 3.1:.2f}x | big {20.0 / 11.1:.2f}x" in out


def test_per_model_options_need_one_value_per_model(tmp_path, capsys, solutions):
    folder = write_folder(tmp_path / "run", variants=("default", "eager"), models=("m/small", "m/big"))
    assert main(["vllm", "analyze", str(folder), "--impl", "solutions", "--kernels-per-step", "300"]) == 2
    err = capsys.readouterr().err
    assert "--kernels-per-step" in err and "2 model(s)" in err
    assert main(["vllm", "analyze", str(folder), "--impl", "solutions", "--kernels-per-step", "300", "400"]) == 0
    record = json.loads((folder / vllm_runs.RESULT_JSON).read_text())
    assert [g["kernels_per_step"] for g in record["groups"]] == [300, 400]
    assert main(["vllm", "analyze", str(folder), "--impl", "solutions", "--kv-shape", "24,2,64,2"]) == 2
    assert "--kv-shape" in capsys.readouterr().err
