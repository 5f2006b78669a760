"""The reference against vLLM 0.26.0's own answers (``coursekit/data/vllm-0.26.0-cases.json``,
recorded by ``tests/platforms/record_vllm_cases.py``): every recorded case, no disagreement.

The public tests of exercises 5 and 6 ask the same of a student's code; here it is the staff's
differential test, independent of the public tests' fixtures, with the data's own provenance.
"""

from __future__ import annotations

import ast

from coursekit.impl import REPO_ROOT, Implementation
from coursekit.vllm_recorded import (CASES, VLLM_VERSION, dispatch_configs, engine_cases,
                                     explicit_max_cases, mode_table, recorded)

buckets = Implementation("solutions").module("buckets")
dispatch = Implementation("solutions").module("dispatch")


def test_the_data_is_vllms_and_says_how_to_re_record():
    assert recorded()["vllm_version"].split("+")[0] == VLLM_VERSION
    script = REPO_ROOT / "tests" / "platforms" / "record_vllm_cases.py"
    assert "record_vllm_cases.py" in recorded()["by"]
    version = next(n.value.value for n in ast.parse(script.read_text()).body
                   if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "VERSION")
    assert version == VLLM_VERSION and CASES.name == f"vllm-{version}-cases.json"
    assert len(engine_cases()) > 1000 and len(explicit_max_cases()) == 600 and len(dispatch_configs()) == 180


def test_capture_sizes_agree_with_vllm():
    wrong = [(c[:3], c[3], buckets.engine_capture_sizes(*c[:3])) for c in engine_cases()
             if buckets.engine_capture_sizes(*c[:3]) != c[3]]
    wrong += [(m, sizes, buckets.default_capture_sizes(m)) for m, sizes in explicit_max_cases()
              if buckets.default_capture_sizes(m) != sizes]
    assert not wrong, wrong[:3]


def test_modes_agree_with_vllm():
    for name, want in mode_table().items():
        mode = dispatch.CUDAGraphMode[name]
        assert (list(mode.value) if isinstance(mode.value, tuple) else mode.value) == want["value"]
        assert bool(mode) is want["bool"]
        for helper in ("separate_routine", "decode_mode", "mixed_mode", "has_full_cudagraphs",
                       "has_piecewise_cudagraphs"):
            got = getattr(mode, helper)()
            assert getattr(got, "name", got) == want[helper], (name, helper)


def test_dispatcher_agrees_with_vllm_on_every_recorded_answer():
    M, BD = dispatch.CUDAGraphMode, dispatch.BatchDescriptor
    limits = {k: tuple(None if v is None else {M[m] for m in v} for v in pair)
              for k, pair in recorded()["dispatch"]["restrictions"].items()}
    answers = 0
    for c in dispatch_configs():
        d = dispatch.CudagraphDispatcher(M[c["mode"]], c["capture_sizes"], c["max_num_seqs"], c["q"])
        if c["mode"] != "NONE":
            assert d.capture_sizes == c["sizes_after_adjustment"], c
        assert {m.name: sorted([k.num_tokens, k.num_reqs, k.uniform] for k in ks)
                for m, ks in d.keys().items()} == c["keys"], c
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
    for ex, idea, path, names in rows:
        path = path.strip().strip("`")
        if path not in files:
            missing.append(f"ex{ex.strip()} {idea.strip()}: no file {path} in vLLM {VLLM_VERSION}")
            continue
        missing += [f"ex{ex.strip()}: {path} has no {name}" for name in re.findall(r"`([^`]+)`", names)
                    if name not in files[path]]
    assert {int(r[0]) for r in rows} >= {3, 4, 5, 6, 7, 8}, "every exercise from 3 to 8 has a row"
    assert not missing, "\n".join(missing)


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
