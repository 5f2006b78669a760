"""vLLM 0.26.0's two GPU model runners side by side, from what each answered (no vLLM needed).

Two records, on one grid of configurations, in one encoding:

* ``coursekit/data/vllm-0.26.0-cases.json``: the V1 runner's ``CudagraphDispatcher``
  (``coursekit/vllm_recorded.py`` reads it);
* ``coursekit/data/vllm-0.26.0-v2-cases.json``: the V2 runner's ``CudaGraphManager``
  (``vllm/v1/worker/gpu/cudagraph_utils.py``), driven for the same modes, sizes,
  ``max_num_seqs`` and decode query lengths ``q``.

``differences()`` lists every answer in which they part; ``table()`` is those differences as
the markdown table of notes chapter 6 (en and zh), which ``python -m coursekit.vllm_runners
--write`` rewrites between its markers (``--check``: exit 1 when a chapter's table is stale).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

from coursekit.vllm_recorded import CASES, VLLM_VERSION, recorded

V2_CASES = CASES.with_name(f"vllm-{VLLM_VERSION}-v2-cases.json")
NOTES = Path(__file__).resolve().parents[1] / "notes"
BLOCK = re.compile(r"(<!-- v1-v2-differences -->\n)(.*?)(<!-- /v1-v2-differences -->\n)", re.DOTALL)


@lru_cache(maxsize=1)
def recorded_v2() -> dict:
    return json.loads(V2_CASES.read_text(encoding="ascii"))


def v2_dispatch_configs() -> list[dict]:
    """The V2 record's configurations: mode, capture_sizes, max_num_seqs, q, capture_descs
    (``[[mode, [[num_tokens, num_reqs, uniform], ...]], ...]``) and dispatch answers ("all
    uniform=0": a mixed batch of ``min(n, max_num_seqs)`` requests; "all uniform=1": ``ceil(n /
    q)`` requests and the runner's own ``get_uniform_token_count``)."""
    return recorded_v2()["dispatch"]["configs"]


def _key(c: dict) -> tuple:
    return c["mode"], tuple(c["capture_sizes"]), c["max_num_seqs"], c["q"]


def differences(v1: dict | None = None, v2: dict | None = None) -> list[list]:
    """Every case where the two records differ, as ``[mode, sizes, max_num_seqs, q, part, n, V1's
    answer, V2's answer]``: ``part`` is "capture_descs" (``n`` 0) or a dispatch call set ("all
    uniform=0" / "all uniform=1", ``n`` the batch's tokens); engine plans as mode "plan <mode>"."""
    v1, v2 = v1 or recorded(), v2 or recorded_v2()
    old = {_key(c): c for c in v1["dispatch"]["configs"]}
    out = []
    for c in v2["dispatch"]["configs"]:
        k, o = _key(c), old[_key(c)]
        head = [k[0], list(k[1]), k[2], k[3]]
        if c["capture_descs"] != o["capture_descs"]:
            out.append([*head, "capture_descs", 0, o["capture_descs"], c["capture_descs"]])
        for part, answers in c["dispatch"].items():
            if len(answers) != len(o["dispatch"][part]):
                raise ValueError(f"the records disagree on how many batches {k} {part} holds")
            out += [[*head, part, n, x, y] for n, (x, y) in enumerate(zip(o["dispatch"][part], answers), 1) if x != y]
    plans = {(p["max_num_seqs"], p["mode"]): p["capture_descs"] for p in v1["engine_plans"]}
    for p in v2["engine_plans"]:
        want = plans[p["max_num_seqs"], p["mode"]]
        if p["capture_descs"] != want:
            out.append(["plan " + p["mode"], None, p["max_num_seqs"], 1, "capture_descs", 0, want, p["capture_descs"]])
    return out


def compared(v2: dict | None = None) -> dict[tuple, int]:
    """How many answers each (q, mode, part) group compares: one capture list, or one answer a batch."""
    out: dict[tuple, int] = defaultdict(int)
    for c in (v2 or recorded_v2())["dispatch"]["configs"]:
        out[c["q"], c["mode"], "capture_descs"] += 1
        for part, answers in c["dispatch"].items():
            out[c["q"], c["mode"], part] += len(answers)
    return out


#: The table's words, per language: its header and how each part is named.
WORDS = {
    "en": {
        "header": "| q | `cudagraph_mode` | what is compared | answers that differ "
        "| first difference: config, batch: V1 → V2 |",
        "capture_descs": "the graphs captured",
        "all uniform=0": "a mixed batch",
        "all uniform=1": "a uniform-decode batch",
        "none": "V1 and V2 agree on every recorded answer.",
        "config": "sizes {sizes}, max_num_seqs {seqs}",
        "sep": ", ",
        "beyond": " (each a batch of more requests than max_num_seqs: one no scheduler makes)",
        "batch": "n = {n}",
    },
    "zh": {
        "header": "| q | `cudagraph_mode` | 比较的内容 | 不同的答案数 | 第一处不同：配置，批次：V1 → V2 |",
        "capture_descs": "捕获的图",
        "all uniform=0": "混合批次",
        "all uniform=1": "均匀 decode 批次",
        "none": "每个记录的答案上 V1 与 V2 一致。",
        "config": "sizes {sizes}，max_num_seqs {seqs}",
        "sep": "，",
        "beyond": "（每一个都是请求数多于 max_num_seqs 的批次：调度器不会排出这样的批次）",
        "batch": "n = {n}",
    },
}


def _beyond_max_num_seqs(d: list) -> bool:
    """A dispatch difference for a batch of more requests than max_num_seqs (the record's calls:
    ceil(n / q) requests for a uniform batch, min(n, max_num_seqs) for a mixed one)."""
    mode, _, seqs, q, part, n, _, _ = d
    return part == "all uniform=1" and -(-n // q) > seqs


def _short(answer) -> str:
    if isinstance(answer, str):
        return answer
    return "; ".join(f"{mode} {[d[0] for d in descs]}" for mode, descs in answer) or "none"


def table(lang: str = "en") -> str:
    """The differences grouped by (q, mode, what is compared), as markdown: how many of the
    group's answers differ (and, when every one is a batch of more requests than max_num_seqs, that
    it is), and the first one. Answers in the records' encoding ('N' eager,
    'Ft,r,u' FULL, 'Pt' PIECEWISE); capture lists as each mode's token counts."""
    if lang not in WORDS:
        raise ValueError(f"lang: expected one of {sorted(WORDS)}, got {lang!r}")
    w, counts = WORDS[lang], compared()
    groups: dict[tuple, list] = defaultdict(list)
    for d in differences():
        groups[d[3], d[0], d[4]].append(d)
    if not groups:
        return w["none"] + "\n"
    rows = [w["header"], "|---|---|---|---|---|"]
    for (q, mode, part), ds in sorted(groups.items()):
        first = ds[0]
        where = w["config"].format(sizes=first[1], seqs=first[2])
        if part != "capture_descs":
            where += w["sep"] + w["batch"].format(n=first[5])
        count = f"{len(ds)} / {counts[q, mode, part]}" + (w["beyond"] if all(map(_beyond_max_num_seqs, ds)) else "")
        rows.append(f"| {q} | {mode} | {w[part]} | {count} | {where}: `{_short(first[6])}` → `{_short(first[7])}` |")
    return "\n".join(rows) + "\n"


def chapters() -> dict[Path, str]:
    return {NOTES / lang / "06-dispatch.md": lang for lang in WORDS}


def stale() -> list[Path]:
    """The chapters whose table is not ``table()`` (or that have no table block)."""
    out = []
    for path, lang in chapters().items():
        text = path.read_text(encoding="utf-8")
        m = BLOCK.search(text)
        if m is None or m.group(2) != table(lang):
            out.append(path)
    return out


def write() -> list[Path]:
    """Rewrite every stale chapter's table; the chapters rewritten."""
    done = []
    for path in stale():
        text = path.read_text(encoding="utf-8")
        if not BLOCK.search(text):
            raise ValueError(f"{path}: no <!-- v1-v2-differences --> block to fill")
        new = BLOCK.sub(lambda m: m.group(1) + table(chapters()[path]) + m.group(3), text)
        path.write_text(new, encoding="utf-8")
        done.append(path)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.vllm_runners", description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite notes chapter 6's tables")
    group.add_argument("--check", action="store_true", help="exit 1 when a chapter's table is stale")
    parser.add_argument("--lang", choices=sorted(WORDS), default="en", help="the table printed (default en)")
    a = parser.parse_args(argv)
    if a.write:
        for path in write():
            print(f"rewrote {path}")
        return 0
    if a.check:
        for path in stale():
            print(f"stale: {path} (python -m coursekit.vllm_runners --write)")
        return 1 if stale() else 0
    print(table(a.lang), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
