"""The reference against vLLM 0.26.0's own answers (``coursekit/data/vllm-0.26.0-cases.json``,
recorded by ``tests/platforms/record_vllm_cases.py``): every recorded case, no disagreement.

The public tests of exercises 5 and 6 ask the same of a student's code; here it is the staff's
differential test, independent of the public tests' fixtures, with the data's own provenance.
"""

from __future__ import annotations

import ast

from coursekit.impl import REPO_ROOT, Implementation
from coursekit.vllm_recorded import (
    CASES,
    VLLM_VERSION,
    dispatch_configs,
    engine_cases,
    explicit_max_cases,
    mode_table,
    recorded,
)

buckets = Implementation("solutions").module("buckets")
dispatch = Implementation("solutions").module("dispatch")


def test_the_data_is_vllms_and_says_how_to_re_record():
    assert recorded()["vllm_version"].split("+")[0] == VLLM_VERSION
    script = REPO_ROOT / "tests" / "platforms" / "record_vllm_cases.py"
    assert "record_vllm_cases.py" in recorded()["by"]
    version = next(
        n.value.value
        for n in ast.parse(script.read_text()).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "VERSION"
    )
    assert version == VLLM_VERSION and CASES.name == f"vllm-{version}-cases.json"
    assert len(engine_cases()) > 1000 and len(explicit_max_cases()) == 600 and len(dispatch_configs()) == 180


def test_capture_sizes_agree_with_vllm():
    wrong = [
        (c[:3], c[3], buckets.engine_capture_sizes(*c[:3]))
        for c in engine_cases()
        if buckets.engine_capture_sizes(*c[:3]) != c[3]
    ]
    wrong += [
        (m, sizes, buckets.default_capture_sizes(m))
        for m, sizes in explicit_max_cases()
        if buckets.default_capture_sizes(m) != sizes
    ]
    assert not wrong, wrong[:3]


def test_modes_agree_with_vllm():
    for name, want in mode_table().items():
        mode = dispatch.CUDAGraphMode[name]
        assert (list(mode.value) if isinstance(mode.value, tuple) else mode.value) == want["value"]
        assert bool(mode) is want["bool"]
        for helper in (
            "separate_routine",
            "decode_mode",
            "mixed_mode",
            "has_full_cudagraphs",
            "has_piecewise_cudagraphs",
        ):
            got = getattr(mode, helper)()
            assert getattr(got, "name", got) == want[helper], (name, helper)


def test_dispatcher_agrees_with_vllm_on_every_recorded_answer():
    M, BD = dispatch.CUDAGraphMode, dispatch.BatchDescriptor
    limits = {
        k: tuple(None if v is None else {M[m] for m in v} for v in pair)
        for k, pair in recorded()["dispatch"]["restrictions"].items()
    }
    answers = 0
    for c in dispatch_configs():
        d = dispatch.CudagraphDispatcher(M[c["mode"]], c["capture_sizes"], c["max_num_seqs"], c["q"])
        if c["mode"] != "NONE":
            assert d.capture_sizes == c["sizes_after_adjustment"], c
        assert {m.name: sorted([k.num_tokens, k.num_reqs, k.uniform] for k in ks) for m, ks in d.keys().items()} == c[
            "keys"
        ], c
        for name, want in c["dispatch"].items():
            limit, uniform = name.rsplit(" uniform=", 1)
            for n, expected in enumerate(want, start=1):
                mode, desc = d.dispatch(n, bool(int(uniform)), *limits[limit])
                if expected == "N":
                    assert (mode, desc) == (M.NONE, BD(n)), (c, name, n)
                else:
                    t, *rest = expected[1:].split(",")
                    key = BD(int(t)) if not rest else BD(int(t), int(rest[0]), bool(int(rest[1])))
                    assert (mode.name[0], desc) == (expected[0], key), (c, name, n, expected)
                answers += 1
    assert answers == 36_000


def test_every_name_the_readme_cites_is_in_vllm():
    """README's "Where it is in vLLM 0.26.0": each file and name must be in the source listing
    recorded from vLLM's wheel (tests/platforms/vllm-0.26.0-source.json)."""
    import json
    import re

    listing = json.loads((REPO_ROOT / "tests" / "platforms" / f"vllm-{VLLM_VERSION}-source.json").read_text())
    assert listing["vllm_version"].split("+")[0] == VLLM_VERSION
    files = listing["files"]
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    table = re.search(r"<!-- vllm-map -->\n(.*?)<!-- /vllm-map -->", readme, re.DOTALL).group(1)
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    assert len(rows) >= 15, "the table lost its rows"
    missing = []
    for ex, idea, path, names, _runner in rows:
        path = path.strip().strip("`")
        if path not in files:
            missing.append(f"ex{ex.strip()} {idea.strip()}: no file {path} in vLLM {VLLM_VERSION}")
            continue
        missing += [
            f"ex{ex.strip()}: {path} has no {name}"
            for name in re.findall(r"`([^`]+)`", names)
            if name not in files[path]
        ]
    assert {int(r[0]) for r in rows} >= {3, 4, 5, 6, 7, 8}, "every exercise from 3 to 8 has a row"
    assert not missing, "\n".join(missing)


V2_TREE = "vllm/v1/worker/gpu/"
RUNNERS = ("V1", "V2", "both")


def _readme_rows() -> list[dict]:
    """The rows of README's "Where it is in vLLM 0.26.0" table: ex, idea, path, names, runner."""
    import re

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    table = re.search(r"<!-- vllm-map -->\n(.*?)<!-- /vllm-map -->", readme, re.DOTALL).group(1)
    lines = table.splitlines()
    header = [c.strip() for c in lines[0].split("|")[1:-1]]
    assert header == ["ex", "idea", "file", "function or class", "runner"], header
    rows = []
    for line in lines[2:]:
        ex, idea, path, names, runner = (c.strip() for c in line.split("|")[1:-1])
        rows.append(
            {
                "ex": int(ex),
                "idea": idea,
                "path": path.strip("`"),
                "runner": runner,
                "names": re.findall(r"`([^`]+)`", names),
            }
        )
    return rows


def test_every_readme_row_says_which_runner():
    """Each row of README's table names the GPU model runner it holds for: V1
    (``vllm/v1/worker/gpu_model_runner.py`` and its ``CudagraphDispatcher``), V2 (the tree
    ``vllm/v1/worker/gpu/``) or both (code they share). A V2 row points into V2's tree, a V1 or
    both row outside it; a V1 name that V2's tree defines too (``GPUModelRunner.capture_model``)
    has its V2 row beside it; and exercises 6, 8 and 9 each point at V2 as well."""
    import json

    listing = json.loads((REPO_ROOT / "tests" / "platforms" / f"vllm-{VLLM_VERSION}-source.json").read_text())
    files = listing["files"]
    rows = _readme_rows()
    wrong = [
        f"ex{r['ex']} {r['idea']}: runner {r['runner']!r}, not one of {RUNNERS}"
        for r in rows
        if r["runner"] not in RUNNERS
    ]
    wrong += [
        f"ex{r['ex']} {r['idea']}: a V2 row outside {V2_TREE}: {r['path']}"
        for r in rows
        if r["runner"] == "V2" and not r["path"].startswith(V2_TREE)
    ]
    wrong += [
        f"ex{r['ex']} {r['idea']}: a {r['runner']} row inside V2's tree: {r['path']}"
        for r in rows
        if r["runner"] != "V2" and r["path"].startswith(V2_TREE)
    ]
    runner_of: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        for name in r["names"]:
            runner_of.setdefault((r["path"], name), set()).add(r["runner"])
    wrong += [f"{path} {name}: rows say {sorted(rs)}" for (path, name), rs in runner_of.items() if len(rs) > 1]
    v2_names = {name for r in rows if r["runner"] == "V2" for name in r["names"]}
    for r in rows:
        if r["runner"] != "V1":
            continue
        for name in r["names"]:
            twins = [p for p, names in files.items() if p.startswith(V2_TREE) and name in names]
            if twins and name not in v2_names:
                wrong.append(f"ex{r['ex']}: V1's {name} has a V2 twin in {twins} without a V2 row")
    assert not wrong, "\n".join(wrong)
    by_ex = {e: {r["runner"] for r in rows if r["ex"] == e} for e in {r["ex"] for r in rows}}
    assert all("V2" in by_ex[e] for e in (6, 8, 9)), {e: sorted(by_ex[e]) for e in (6, 8, 9)}
    assert all("V1" in by_ex[e] for e in (3, 5, 6, 8, 9)), by_ex


def _vllm_source():
    """vLLM 0.26.0's source: $LAUNCH_TAX_VLLM_SOURCE, the one this Python can import, or the
    recording venv's (tests/platforms/record_vllm_cases.py installs it in /tmp/vllm-venv)."""
    import glob
    import importlib.util
    import os
    import re
    from pathlib import Path

    candidates = [os.environ.get("LAUNCH_TAX_VLLM_SOURCE", "")]
    try:
        spec = importlib.util.find_spec("vllm")
        candidates.append(str(Path(spec.origin).parent) if spec and spec.origin else "")
    except (ImportError, ValueError):
        pass
    candidates += sorted(glob.glob("/tmp/vllm-venv/lib/python3*/site-packages/vllm"))
    for c in filter(None, candidates):
        version = Path(c) / "_version.py"
        if version.is_file() and re.search(rf"version = '{re.escape(VLLM_VERSION)}[+']", version.read_text()):
            return Path(c)
    return None


def test_no_v1_row_is_reached_by_the_v2_runner():
    """From vLLM's own source: no file of V2's tree imports a V1 row's name from that row's file
    and uses it (V2 imports V1's ``GPUModelRunner`` for ``reload_weights`` only, never for a
    method the table cites); V1's spec-decode rounding is called only when the V2 runner is not
    used; and V2's ``profile_cudagraph_memory`` returns 0 (no graph memory estimate)."""
    import ast as pyast

    import pytest

    src = _vllm_source()
    if src is None:
        pytest.skip(f"vLLM {VLLM_VERSION}'s source: set LAUNCH_TAX_VLLM_SOURCE to its package folder")
    v2_files = sorted((src / "v1" / "worker" / "gpu").rglob("*.py"))
    assert len(v2_files) > 20, v2_files
    trees = {f: pyast.parse(f.read_text(encoding="utf-8")) for f in v2_files}
    reached = []
    for r in _readme_rows():
        if r["runner"] != "V1":
            continue
        module = r["path"].removesuffix(".py").replace("/", ".")
        for name in r["names"]:
            head, _, leaf = name.partition(".")
            for f, tree in trees.items():
                aliases = {
                    a.asname or a.name
                    for n in pyast.walk(tree)
                    if isinstance(n, pyast.ImportFrom) and n.module == module
                    for a in n.names
                    if a.name == head
                }
                aliases |= {
                    f"{a.asname or a.name}.{head}"
                    for n in pyast.walk(tree)
                    if isinstance(n, pyast.Import)
                    for a in n.names
                    if a.name == module
                }
                used = (
                    aliases
                    if not leaf
                    else {
                        alias
                        for alias in aliases
                        for n in pyast.walk(tree)
                        if isinstance(n, pyast.Attribute) and n.attr == leaf and pyast.unparse(n.value) == alias
                    }
                )
                if used:
                    reached.append(f"{f.relative_to(src.parent)} reaches V1's {r['path']} {name}")
    assert not reached, "\n".join(reached)

    compilation = pyast.parse((src / "config" / "compilation.py").read_text(encoding="utf-8"))
    guards = [
        pyast.unparse(n.test)
        for n in pyast.walk(compilation)
        if isinstance(n, pyast.If)
        for c in pyast.walk(n)
        if isinstance(c, pyast.Call) and getattr(c.func, "attr", "") == "adjust_cudagraph_sizes_for_spec_decode"
    ]
    assert guards and all("not use_v2_model_runner" in g for g in guards), guards

    runner = trees[src / "v1" / "worker" / "gpu" / "model_runner.py"]
    profile = [
        n for n in pyast.walk(runner) if isinstance(n, pyast.FunctionDef) and n.name == "profile_cudagraph_memory"
    ]
    returns = [pyast.unparse(n.value) for f in profile for n in pyast.walk(f) if isinstance(n, pyast.Return)]
    assert len(profile) == 1 and returns == ["0"], returns


def test_the_engine_runs_each_mode_as_vllm_resolves_it_for_its_attention():
    """``ToyModel.cudagraph_support`` is FlashAttention 2's ``UNIFORM_BATCH`` and the model is cut at
    its attention calls: each engine runs the mode vLLM 0.26.0's
    ``CompilationConfig.resolve_cudagraph_mode_and_sizes`` resolves for that (recorded: FULL ->
    FULL_AND_PIECEWISE, every other mode as asked)."""
    from coursekit.toymodel import ToyModel
    from coursekit.vllm_recorded import resolved_modes

    engine = Implementation("solutions").module("engine")
    runs = resolved_modes(ToyModel.cudagraph_support, attention_split=True)
    assert runs["FULL"] == "FULL_AND_PIECEWISE" and len(runs) == 5, runs
    for asked, want in runs.items():
        got = engine.DecodeEngine(ToyModel(), mode=engine.CUDAGraphMode[asked]).mode.name
        assert got == want, (asked, got, want)


def test_the_engines_capture_plan_is_vllms():
    """DecodeEngine with its default sizes captures what vLLM 0.26.0 captures for max_num_seqs
    requests of one token each, in the mode it runs (resolved for its attention, as vLLM does):
    the same (mode, descriptor) keys in the same order."""
    import torch

    from coursekit.standin import RecordingCapture
    from coursekit.toymodel import ModelConfig, ToyModel
    from coursekit.vllm_recorded import resolved_modes

    engine = Implementation("solutions").module("engine")
    plans = recorded()["engine_plans"]
    assert len(plans) == 40
    by_key = {(p["max_num_seqs"], p["mode"]): p for p in plans}
    for plan in plans:
        if plan["max_num_seqs"] > 24 and plan["mode"] not in ("FULL", "FULL_AND_PIECEWISE"):
            continue  # the large engines once or twice: the dispatcher's rule is checked above
        model = ToyModel(ModelConfig(max_seqs=plan["max_num_seqs"], n_layers=1, max_seq_len=8))
        runner = engine.DecodeEngine(model, mode=engine.CUDAGraphMode[plan["mode"]], capture=RecordingCapture())
        # The model's attention holds uniform decode batches only (FlashAttention 2's
        # UNIFORM_BATCH): the plan is the one of the mode vLLM resolves that to.
        runs_as = resolved_modes(model.cudagraph_support)[plan["mode"]]
        want = by_key[(plan["max_num_seqs"], runs_as)]["capture_descs"]
        got = [[m.name, d.num_tokens, d.num_reqs, d.uniform] for m, d in runner.dispatcher.capture_descs()]
        assert got == want, (plan["max_num_seqs"], plan["mode"], runs_as)
        with torch.no_grad():
            runner.capture_model()
        assert list(runner.graphs) == runner.dispatcher.capture_descs(), "captured in the plan's order"
