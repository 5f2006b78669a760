"""vLLM 0.26.0's V2 GPU model runner against its V1 runner, from their records (no vLLM needed).

``coursekit/data/vllm-0.26.0-v2-cases.json`` (``tests/platforms/record_vllm_v2_cases.py``: V2's
``CudaGraphManager``) and ``coursekit/data/vllm-0.26.0-cases.json`` (``record_vllm_cases.py``:
V1's ``CudagraphDispatcher``), on the same grid, answers in the same encoding.

* q = 1: the capture lists and engine plans agree everywhere; the dispatch answers agree except
  in one recorded set: mode FULL, a uniform batch of n > max_num_seqs one-token requests (a batch
  the scheduler never makes). V1 caps num_reqs at max_num_seqs and answers its mixed FULL graph;
  V2 finds that graph's num_reqs too small and runs eager.
* q > 1: they differ (V2 does not round the sizes to multiples of q, it rounds its decode graphs);
  the number of differences is the recorded one.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from coursekit import vllm_runners
from coursekit.vllm_recorded import recorded
from coursekit.vllm_runners import _key, differences, recorded_v2

V1, V2 = recorded(), recorded_v2()


def test_the_v2_record_is_vllms_on_v1s_grid():
    assert V2["vllm_version"] == V1["vllm_version"] and V2["vllm_version"].split("+")[0] == "0.26.0"
    assert "record_vllm_v2_cases.py" in V2["by"] and V2["recorded"]
    assert (Path(__file__).resolve().parent / "platforms" / "record_vllm_v2_cases.py").is_file()
    assert [_key(c) for c in V2["dispatch"]["configs"]] == [_key(c) for c in V1["dispatch"]["configs"]]
    assert len(V2["dispatch"]["configs"]) == 180
    assert {(p["max_num_seqs"], p["mode"]) for p in V2["engine_plans"]} == {
        (p["max_num_seqs"], p["mode"]) for p in V1["engine_plans"]
    }
    for c in V2["dispatch"]["configs"]:  # only V1's unrestricted calls have a V2 counterpart
        assert set(c["dispatch"]) == {"all uniform=0", "all uniform=1"}


#: How many answers differ at q = 2 and 3, counted when V2 was recorded (2026-12-05): 48 capture
#: lists and 1,368 dispatch answers. A re-record that changes it changes what the course teaches.
Q_ABOVE_1_DIFFERENCES = 1416


def test_at_q1_v2_agrees_with_v1_but_for_one_set():
    diffs = [d for d in differences(V1, V2) if d[3] == 1]
    # The whole set, said as a rule: FULL mode, uniform batches with more requests than max_num_seqs.
    assert diffs and all(
        mode == "FULL"
        and part == "all uniform=1"
        and n > seqs
        and old.startswith("F")
        and old.endswith(f",{seqs},0")
        and new == "N"
        for mode, _, seqs, _, part, n, old, new in diffs
    )
    expected = [
        [c["mode"], c["capture_sizes"], c["max_num_seqs"], 1, "all uniform=1", n, old, "N"]
        for c in V1["dispatch"]["configs"]
        if c["mode"] == "FULL" and c["q"] == 1
        for n, old in enumerate(c["dispatch"]["all uniform=1"], 1)
        if n > c["max_num_seqs"] and old != "N"
    ]
    assert diffs == expected and len(diffs) == 164
    # Capture lists and engine plans: no difference at all.
    assert not [d for d in diffs if d[4] == "capture_descs"]


def test_at_q_above_1_v2_differs_from_v1_by_the_recorded_count():
    diffs = [d for d in differences(V1, V2) if d[3] > 1]
    assert len(diffs) == Q_ABOVE_1_DIFFERENCES, len(diffs)
    # V1 rounds the FULL sizes to multiples of q; V2 keeps them for its mixed graphs.
    assert any(d[4] == "capture_descs" for d in diffs)


def test_the_comparison_can_fail():
    v2 = copy.deepcopy(V2)
    c = next(c for c in v2["dispatch"]["configs"] if c["q"] == 1 and c["mode"] == "FULL_AND_PIECEWISE")
    assert c["dispatch"]["all uniform=0"][0] == "P1"
    c["dispatch"]["all uniform=0"][0] = "N"
    diffs = [d for d in differences(V1, v2) if d[3] == 1]
    assert len(diffs) == 165
    assert [c["mode"], c["capture_sizes"], c["max_num_seqs"], 1, "all uniform=0", 1, "P1", "N"] in diffs
    v2 = copy.deepcopy(V2)
    p = next(p for p in v2["engine_plans"] if p["capture_descs"])
    p["capture_descs"].pop()
    assert any(d[4] == "capture_descs" for d in differences(V1, v2) if d[3] == 1)


def test_the_notes_table_is_generated_from_the_records():
    """Notes chapter 6 (en and zh) holds ``vllm_runners.table()`` between its markers, never a
    table typed by hand: a stale one names the command that rewrites it."""
    assert not vllm_runners.stale(), (
        f"stale V1/V2 table in {vllm_runners.stale()}: run python -m coursekit.vllm_runners --write"
    )
    for path, lang in vllm_runners.chapters().items():
        block = vllm_runners.BLOCK.search(path.read_text(encoding="utf-8")).group(2)
        assert block == vllm_runners.table(lang) and block.count("\n") == 2 + len(
            {(d[3], d[0], d[4]) for d in differences()}
        ), path
    # The q = 1 row says its batches are ones no scheduler makes; a q > 1 row does not.
    rows = {tuple(c.strip() for c in r.split("|")[1:4]): r for r in vllm_runners.table("en").splitlines()}
    assert "more requests than max_num_seqs" in rows["1", "FULL", "a uniform-decode batch"]
    assert "more requests" not in rows["2", "FULL", "a mixed batch"]


def test_the_table_follows_the_records(tmp_path, monkeypatch):
    """An altered V2 answer changes the table, and a chapter holding the old one is stale."""
    v2 = copy.deepcopy(V2)
    c = next(c for c in v2["dispatch"]["configs"] if c["q"] == 1 and c["mode"] == "PIECEWISE")
    c["dispatch"]["all uniform=0"][0] = "N"
    before = vllm_runners.table("en")
    monkeypatch.setattr(vllm_runners, "recorded_v2", lambda: v2)
    after = vllm_runners.table("en")
    assert after != before and "| 1 | PIECEWISE | a mixed batch | 1 / " in after
    chapter = tmp_path / "en" / "06-dispatch.md"
    chapter.parent.mkdir()
    chapter.write_text("# 6\n<!-- v1-v2-differences -->\n" + before + "<!-- /v1-v2-differences -->\n", encoding="utf-8")
    monkeypatch.setattr(vllm_runners, "chapters", lambda: {chapter: "en"})
    assert vllm_runners.stale() == [chapter] and vllm_runners.main(["--check"]) == 1
    assert vllm_runners.write() == [chapter] and not vllm_runners.stale()
    assert after in chapter.read_text(encoding="utf-8")


def test_the_table_refuses_an_unknown_language():
    with pytest.raises(ValueError, match="lang"):
        vllm_runners.table("fr")
