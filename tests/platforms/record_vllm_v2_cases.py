"""Record vLLM's V2 GPU model runner's CUDA-graph decisions: staff only, in vLLM's own venv.

The companion of ``record_vllm_cases.py`` (the V1 ``CudagraphDispatcher``): the same
configurations, driven through the V2 runner's ``CudaGraphManager``
(``vllm/v1/worker/gpu/cudagraph_utils.py``), so that ``tests/test_vllm_v2_cases.py`` can compare
the two runners answer by answer without vLLM.

What it drives (vLLM's pure logic, nothing that needs a GPU):
* ``CudaGraphManager.__init__`` and so ``_init_candidates``: its ``BatchExecutionDescriptor``
  capture lists (``_capture_descs``), written in the order ``CudaGraphManager.capture`` walks them
  (PIECEWISE first, then FULL; each list largest first);
* ``CudaGraphManager.dispatch(num_reqs, num_tokens, uniform_token_count, num_active_loras=0)``
  for every ``num_tokens`` the V1 record covers (1 .. largest size + 2), for a mixed batch and a
  uniform-decode batch, with ``uniform_token_count`` from the runner's own
  ``get_uniform_token_count``.

The stand-ins (``CudaGraphManager`` reads them and nothing else of a ``VllmConfig``):
* ``vllm_config``: ``scheduler_config.max_num_seqs``, ``compilation_config``
  (``cudagraph_capture_sizes``, ``max_cudagraph_capture_size`` = the largest size),
  ``parallel_config`` (data and tensor parallel size 1), ``speculative_config = None`` (no dynamic
  speculative decoding) and ``num_speculative_tokens = q - 1``;
* ``get_pp_group`` (one pipeline rank) and ``current_platform`` (no graph pool) in the module;
* ``_graphs_captured = True``: what ``capture`` (which needs a GPU) sets, so ``dispatch`` answers
  from the candidate lists as it does after capture.
The mode is the one asked for and the sizes are the ones given: the V2 runner does not round
them for speculative decoding (``resolve_cudagraph_mode_and_sizes(..., use_v2_model_runner=True)``
skips ``adjust_cudagraph_sizes_for_spec_decode``); it rounds each size up to a multiple of ``q``
for its decode graphs itself. ``VLLM_USE_BREAKABLE_CUDAGRAPH`` must be unset (PIECEWISE graphs
then have ``num_reqs = None``).

The grid is V1's, read from V1's record (``coursekit/data/vllm-<version>-cases.json``, as data:
re-record V1 first): the mode, sizes, ``max_num_seqs`` and ``q`` of every ``dispatch`` config, and
the ``max_num_seqs`` of every engine plan (their sizes from ``VllmConfig._set_cudagraph_sizes`` on
the same stand-in). So the two records always share one grid, and this script imports nothing of
the course.

To re-record (the venv is the one of ``record_vllm_cases.py``'s docstring), from the repository
root:

    /tmp/vllm-venv/bin/python tests/platforms/record_vllm_v2_cases.py

It writes ``coursekit/data/vllm-<version>-v2-cases.json``; run twice the same day, the file is
the same byte for byte. It records V2's answers only; ``tests/test_vllm_v2_cases.py`` compares them
with V1's.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import types
from pathlib import Path

VERSION = "0.26.0"
OUT = Path(__file__).resolve().parents[2] / "coursekit" / "data" / f"vllm-{VERSION}-v2-cases.json"
V1 = OUT.with_name(f"vllm-{VERSION}-cases.json")

try:
    import vllm
    from vllm.config import CompilationConfig, CUDAGraphMode, VllmConfig
    from vllm.v1.worker.gpu import cudagraph_utils
    from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor, CudaGraphManager
except ImportError as exc:  # pragma: no cover - the staff machine's venv
    sys.exit(f"record_vllm_v2_cases.py runs in vLLM's own venv (see record_vllm_cases.py): {exc}")

if vllm.__version__.split("+")[0] != VERSION:
    sys.exit(f"expected vLLM {VERSION}, found {vllm.__version__}: change VERSION (and the recipe)")
if os.environ.get("VLLM_USE_BREAKABLE_CUDAGRAPH", "0") == "1":
    sys.exit("unset VLLM_USE_BREAKABLE_CUDAGRAPH: the record is of vLLM's default")

# One pipeline rank, no graph pool: the only things CudaGraphManager.__init__ asks of a process.
cudagraph_utils.get_pp_group = lambda: types.SimpleNamespace(is_first_rank=True, is_last_rank=True)
cudagraph_utils.current_platform = types.SimpleNamespace(get_global_graph_pool=lambda: None)


def capture_sizes(max_num_seqs: int, spec: int, batched: int) -> list[int]:
    """``VllmConfig._set_cudagraph_sizes`` on record_vllm_cases.py's stand-in (its CUDA path)."""
    compilation = CompilationConfig(cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE)
    standin = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False),
        compilation_config=compilation,
        num_speculative_tokens=spec,
        scheduler_config=types.SimpleNamespace(max_num_seqs=max_num_seqs, max_num_batched_tokens=batched),
        parallel_config=types.SimpleNamespace(tensor_parallel_size=1),
        performance_mode="throughput",
    )
    VllmConfig._set_cudagraph_sizes(standin)
    return list(compilation.cudagraph_capture_sizes)


def manager(mode: CUDAGraphMode, sizes: list[int], max_num_seqs: int, q: int) -> CudaGraphManager:
    config = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(max_num_seqs=max_num_seqs),
        compilation_config=types.SimpleNamespace(
            cudagraph_capture_sizes=list(sizes), max_cudagraph_capture_size=max(sizes)
        ),
        parallel_config=types.SimpleNamespace(data_parallel_size=1, tensor_parallel_size=1),
        speculative_config=None,
        num_speculative_tokens=q - 1,
    )
    m = CudaGraphManager(config, device=None, cudagraph_mode=mode, decode_query_len=q)
    assert not m.use_breakable_cg
    m._graphs_captured = True  # what capture() sets once the graphs exist (it needs a GPU)
    return m


def desc(d: BatchExecutionDescriptor, q: int) -> list:
    """V1's [num_tokens, num_reqs, uniform]: uniform is ``uniform_token_count is not None`` (it is
    then always the decode query length q)."""
    assert d.num_active_loras == 0 and d.uniform_token_count in (None, q), d
    return [d.num_tokens, d.num_reqs, d.uniform_token_count is not None]


def capture_descs(m: CudaGraphManager, q: int) -> list:
    """``_capture_descs`` in the order ``capture`` walks it: PIECEWISE, then FULL."""
    return [
        [mode.name, [desc(d, q) for d in m._capture_descs[mode]]]
        for mode in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)
        if mode in m._capture_descs
    ]


def call(n: int, uniform: bool, q: int, max_num_seqs: int) -> tuple[int, int | None]:
    """The (num_reqs, uniform_token_count) the V2 runner passes for a batch of n tokens.

    Uniform decode: ceil(n / q) requests of q tokens (the last one short when q does not divide
    n; ``get_uniform_token_count`` then says None, as the runner computes it). Mixed:
    min(n, max_num_seqs) requests and uniform_token_count None (a mixed descriptor's num_reqs,
    min(its num_tokens, max_num_seqs), is never smaller, so the count does not change the answer).
    """
    if uniform:
        num_reqs = -(-n // q)
        return num_reqs, cudagraph_utils.get_uniform_token_count(num_reqs, n, q)
    return min(n, max_num_seqs), None


def answer(m: CudaGraphManager, n: int, uniform: bool, q: int, max_num_seqs: int) -> str:
    """V1's encoding: 'N' (NONE, eager at n tokens), 'Ft,r,u' (FULL), 'Pt' (PIECEWISE with
    num_reqs None and no uniform count) or 'Pt,r,u'; 'error T' if dispatch raised T."""
    num_reqs, count = call(n, uniform, q, max_num_seqs)
    try:
        got = m.dispatch(num_reqs, n, count, num_active_loras=0)
    except Exception as exc:  # noqa: BLE001 - recorded, not hidden
        return f"error {type(exc).__name__}"
    if got.cg_mode == CUDAGraphMode.NONE:
        assert (got.num_tokens, got.num_reqs) == (n, num_reqs), (n, got)
        return "N"
    t, r, u = desc(got, q)
    return f"{got.cg_mode.name[0]}{t}" if r is None and not u else f"{got.cg_mode.name[0]}{t},{r},{int(u)}"


def record_dispatch(v1: dict) -> list[dict]:
    """V2's answers on the configurations of V1's record, in its order."""
    out = []
    for config in v1["dispatch"]["configs"]:
        mode, sizes = CUDAGraphMode[config["mode"]], config["capture_sizes"]
        max_num_seqs, q = config["max_num_seqs"], config["q"]
        m = manager(mode, sizes, max_num_seqs, q)
        top = max(sizes) + 2
        calls = {
            f"all uniform={int(u)}": [answer(m, n, u, q, max_num_seqs) for n in range(1, top + 1)]
            for u in (False, True)
        }
        out.append(
            {
                "mode": mode.name,
                "capture_sizes": sizes,
                "max_num_seqs": max_num_seqs,
                "q": q,
                "capture_descs": capture_descs(m, q),
                "dispatch": calls,
            }
        )
    return out


def record_engine_plans(v1: dict) -> list[dict]:
    """The engines of V1's record (q = 1, 8192 tokens), V2's capture descriptors in capture order,
    flattened like V1's: [mode, num_tokens, num_reqs, uniform]."""
    plans = []
    for max_num_seqs in sorted({p["max_num_seqs"] for p in v1["engine_plans"]}):
        sizes = capture_sizes(max_num_seqs, 0, 8192)
        for mode in CUDAGraphMode:
            m = manager(mode, sizes, max_num_seqs, 1)
            plans.append(
                {
                    "max_num_seqs": max_num_seqs,
                    "mode": mode.name,
                    "capture_sizes": sizes,
                    "capture_descs": [[name, *d] for name, ds in capture_descs(m, 1) for d in ds],
                }
            )
    return plans


def main() -> None:
    v1 = json.loads(V1.read_text(encoding="ascii"))
    assert v1["vllm_version"] == vllm.__version__, "re-record V1 first"
    configs = record_dispatch(v1)
    data = {
        "vllm_version": vllm.__version__,
        "recorded": datetime.date.today().isoformat(),
        "by": "tests/platforms/record_vllm_v2_cases.py (its docstring: the stand-ins and the command)",
        "driven": "vllm/v1/worker/gpu/cudagraph_utils.py: CudaGraphManager (V2 GPU model runner)",
        "dispatch": {
            "signature": "CudaGraphManager.dispatch(num_reqs, num_tokens, uniform_token_count, num_active_loras)",
            "calls": "'all uniform=1': num_reqs = ceil(n / q), uniform_token_count = "
            "get_uniform_token_count(num_reqs, n, q) (q, or None when q does not divide n); "
            "'all uniform=0': num_reqs = min(n, max_num_seqs), uniform_token_count None; "
            "num_active_loras 0. V2 has no valid_modes / invalid_modes: only V1's 'all' compares",
            "answers": "index i is num_tokens = i + 1; as V1's: 'N' = cg_mode NONE (eager, num_tokens "
            "unpadded); 'Ft,r,u' = FULL BatchExecutionDescriptor(num_tokens=t, num_reqs=r, "
            "uniform_token_count=q if u else None); 'Pt' = PIECEWISE with num_reqs None and "
            "uniform_token_count None, 'Pt,r,u' like F; 'error T': dispatch raised T",
            "descriptor": "BatchExecutionDescriptor mapped onto V1's [num_tokens, num_reqs, uniform]: "
            "uniform = uniform_token_count is not None (always q then); num_active_loras 0",
            "capture_descs": "[[mode, [descriptor, ...]], ...] in CudaGraphManager.capture's order: "
            "PIECEWISE then FULL, each largest num_tokens first",
            "configs": configs,
        },
        "engine_plans": record_engine_plans(v1),
    }
    OUT.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n", encoding="ascii")
    print(
        f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB, {len(configs)} configurations, "
        f"{len(data['engine_plans'])} engine plans) from vLLM {vllm.__version__}"
    )


if __name__ == "__main__":
    main()
