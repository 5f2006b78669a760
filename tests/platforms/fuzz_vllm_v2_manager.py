"""Drive vLLM 0.26.0's own V2 ``CudaGraphManager`` and the course's reference side by side on random
configurations: staff only, in vLLM's venv (``record_vllm_cases.py``'s docstring has the recipe).

The recorded grid (``record_vllm_v2_cases.py``) is what the tests hold the exercise to; this is the
wider net behind it: random capture sizes (1..8 of 1..79), ``max_num_seqs`` 1..40 and ``q`` 1..4 in
every mode, comparing ``capture_descs``, ``candidates`` (vLLM's ``_candidates``) and ``dispatch``
for random batches, and ``get_uniform_token_count`` on small batches. From the repository root:

    /tmp/vllm-venv/bin/python tests/platforms/fuzz_vllm_v2_manager.py [TRIALS] [SEED]

It prints the mismatches and a summary line, and exits 1 on any mismatch. 2026-12-05, 600 trials,
seed 34: 3,000 managers, 183,105 answers (capture lists, candidate lists, dispatches,
uniform counts), no mismatch.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

import record_vllm_v2_cases as recorder  # it patches what CudaGraphManager asks of a process
from vllm.config import CUDAGraphMode

from solutions import dispatch


def plain(d) -> list:
    return [d.cg_mode.name, d.num_tokens, d.num_reqs, d.uniform_token_count]


def main(trials: int = 600, seed: int = 34) -> int:
    rng, bad, answers = random.Random(seed), 0, 0
    for _ in range(trials):
        sizes = sorted(rng.sample(range(1, 80), rng.randint(1, 8)))
        seqs, q = rng.randint(1, 40), rng.randint(1, 4)
        for mode in CUDAGraphMode:
            theirs = recorder.manager(mode, sizes, seqs, q)
            ours = dispatch.CudaGraphManager(dispatch.CUDAGraphMode[mode.name], sizes, seqs, q)
            want = [
                plain(d)
                for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)
                for d in theirs._capture_descs.get(m, [])
            ]
            got = [plain(d) for d in ours.capture_descs()]
            answers += 1
            if want != got:
                bad += 1
                print(f"capture_descs {mode.name} {sizes} {seqs} {q}: vLLM {want}, ours {got}")
            for _ in range(30):
                n = rng.randint(1, max(sizes) + 3)
                reqs = rng.randint(1, n)
                count = rng.choice([None, q, n // reqs])
                pairs = [
                    ([plain(d) for d in theirs._candidates.get((n, 0), [])], [plain(d) for d in ours.candidates(n)]),
                    (plain(theirs.dispatch(reqs, n, count, num_active_loras=0)), plain(ours.dispatch(reqs, n, count))),
                ]
                for what, (w, g) in zip(("candidates", "dispatch"), pairs):
                    answers += 1
                    if w != g:
                        bad += 1
                        print(f"{what} {mode.name} {sizes} {seqs} {q} ({reqs}, {n}, {count}): vLLM {w}, ours {g}")
    for reqs in range(1, 6):
        for n in range(reqs, 3 * reqs + 1):
            for length in range(1, 4):
                answers += 1
                w = recorder.cudagraph_utils.get_uniform_token_count(reqs, n, length)
                if w != dispatch.get_uniform_token_count(reqs, n, length):
                    bad += 1
                    print(f"get_uniform_token_count({reqs}, {n}, {length}): vLLM {w}")
    print(f"{trials * len(CUDAGraphMode)} managers, {answers} answers, {bad} mismatches (seed {seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(*map(int, sys.argv[1:3])))
