"""The kill matrix: what the public tests and the grader do to every mutant in tests/mutants/.

    python -m tests.kill_matrix            # print it (a few minutes: every mutant, both ways)
    python -m tests.kill_matrix --write    # also rewrite README.md's table, tests/kill_matrix.md
                                           # and tests/kill_matrix.json (for tests/test_parity.py)
    python -m tests.kill_matrix --secrets 16   # official grading: every mutant under 16 fresh secrets
    python -m tests.kill_matrix --gpu-record JUNIT --machine "..."
                                           # the GPU-only mutants' record (tests/kill_matrix_gpu.json)
                                           # from `bash .ci/gpu mutants`'s junit.xml

Per exercise: how many mutants, how many the public tests reject (at least one test fails) and
how many lose points in the grader (practice inputs, CPU checks; the GPU-only mutants need a
GPU and are counted apart), and the points they lose. ``tests/kill_matrix.md`` lists every
mutant with its kind and the points it loses; ``tests/kill_matrix.json`` records, for every CPU
mutant, every public test it fails (no ``-x``) and every check it loses, which
tests/test_parity.py holds against the map of which check enforces which public test's rule.
CI does not run this script: it asserts the same facts mutant by mutant (tests/test_corpus.py,
tests/test_grader_corpus.py), and tests/test_release_whole.py checks that the README's counts
match the corpus.

Official grading draws each check's inputs from the grading secret and the submission, so a
mutant caught on one draw could slip through another. ``--secrets N`` grades every CPU mutant,
the reference and tests/alternatives under N fresh random secrets and lists each draw where a
mutant kept every point or a right answer lost one (CI grades one fixed secret).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from coursekit import course
from coursekit.impl import REPO_ROOT
from tests import mutants
from tests.harness import submission

BEGIN, END = "<!-- kill-matrix -->", "<!-- /kill-matrix -->"
EXERCISES = [e.marker for e in course.EXERCISES]  # in course order (ex10 after ex9)


def counts() -> dict[str, tuple[int, int]]:
    """``{exercise: (CPU mutants, GPU-only mutants)}`` of the corpus as it is now."""
    out = {e: [0, 0] for e in EXERCISES}
    for m in mutants.ALL:
        out[mutants.MARKERS[m.module]][1 if m.gpu else 0] += 1
    return {e: (c, g) for e, (c, g) in out.items()}


def cpu_mutants():
    """``(mutant, exercise, folder)`` for every CPU mutant: the reference with that mutant's
    module swapped in, in a temporary folder that lasts until the next one."""
    for m in mutants.ALL:
        if m.gpu:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            source = mutants.apply(m, (REPO_ROOT / "solutions" / f"{m.module}.py").read_text())
            yield m, mutants.MARKERS[m.module], submission(Path(tmp) / "s", **{m.module: source})


def measure() -> list[dict]:
    """Every CPU mutant through the public tests and the grader."""
    from grader.judge import Judge, runtime_files
    from grader.submission import load
    from tests import warm_worker
    from tests.warm_pytest import WarmPytest

    warm, rows = WarmPytest(hide_gpu=True), []
    with warm_worker.serve(runtime_files()):
        judge = Judge(jobs=2)
        for m, exercise, folder in cpu_mutants():
            outcome = warm.run(folder, exercise, profile="parity")
            result = judge.grade_exercise(load(folder), exercise)
            rows.append(
                {
                    "id": m.id,
                    "exercise": exercise,
                    "kind": m.kind or "classic",
                    "why": m.why,
                    "public": bool(outcome.failed),
                    "lost": result.max_score - result.score,
                    "of": result.max_score,
                    "failed_tests": sorted({test_id(t) for t in outcome.failed}),
                    "lost_checks": sorted(c.check.id for c in result.checks if c.status == "failed"),
                }
            )
            print(
                f"{m.id:50} public {'rejected' if outcome.failed else 'SURVIVED':8} "
                f"grader -{rows[-1]['lost']:g}/{result.max_score:g}",
                file=sys.stderr,
            )
    warm.close()
    return rows


def test_id(junit_name: str) -> str:
    """``test_<module>.py::test_name`` of a junit ``exercises.tests.test_<module>::test_name[params]``
    (``test_checks.py::test_check[<module>.<check>]`` keeps its parameter)."""
    where, name = junit_name.rsplit("::", 1)
    module = where.rsplit(".", 1)[-1]
    # test_checks.py's parameter is the check it runs: kept, so the record says which check failed.
    return f"{module}.py::{name if module == 'test_checks' else name.split('[', 1)[0]}"


def official(n: int) -> list[str]:
    """Every CPU mutant, the reference and the alternatives, graded under ``n`` fresh secrets:
    a line for each draw where a mutant kept every point or a right answer lost one."""
    import secrets as random_secrets

    from grader.judge import Judge, runtime_files
    from grader.secret import GradingSecret
    from grader.submission import load
    from tests import warm_worker

    wrong = []
    with warm_worker.serve(runtime_files()):
        judges = [
            Judge(jobs=2, secret=GradingSecret(random_secrets.token_hex(32).encode(), f"draw {i}")) for i in range(n)
        ]
        for folder in ("solutions", "tests/alternatives"):
            for i, judge in enumerate(judges):
                lost = [
                    c.check.id
                    for e in judge.grade(load(REPO_ROOT / folder)).exercises
                    for c in e.checks
                    if c.status == "failed"
                ]
                if lost:
                    wrong.append(f"{folder} lost {lost} under secret {i}")
            print(f"{folder:50} {n} secrets done", file=sys.stderr)
        for m, exercise, folder in cpu_mutants():
            kept = [
                i
                for i, judge in enumerate(judges)
                if (r := judge.grade_exercise(load(folder), exercise)).score == r.max_score
            ]
            wrong += [f"{m.id} kept every point under secret {i}" for i in kept]
            print(f"{m.id:50} escaped {len(kept)} of {n}", file=sys.stderr)
    return wrong


def summary(rows: list[dict]) -> str:
    by = defaultdict(list)
    for row in rows:
        by[row["exercise"]].append(row)
    n = counts()
    lines = [
        "| exercise | mutants (CPU + GPU-only) | rejected by the public tests | lose points "
        "in the grader | points lost: min / median / max (of the exercise's CPU points) |",
        "|---|---|---|---|---|",
    ]
    for e in EXERCISES:
        got = by[e]
        lost = [r["lost"] for r in got]
        spread = f"{min(lost):g} / {statistics.median(lost):g} / {max(lost):g} (of {got[0]['of']:g})" if got else "-"
        lines.append(
            f"| {e} | {n[e][0]} + {n[e][1]} | {sum(r['public'] for r in got)} of {len(got)} | "
            f"{sum(r['lost'] > 0 for r in got)} of {len(got)} | {spread} |"
        )
    total = len(rows)
    lines.append(
        f"| all | {sum(c for c, _ in n.values())} + {sum(g for _, g in n.values())} | "
        f"{sum(r['public'] for r in rows)} of {total} | {sum(r['lost'] > 0 for r in rows)} "
        f"of {total} | |"
    )
    return "\n".join(lines)


def details(rows: list[dict]) -> str:
    lines = [
        "# Kill matrix, mutant by mutant",
        "",
        "Generated by `python -m tests.kill_matrix --write` (practice inputs, CPU checks); the "
        "GPU-only mutants are caught by the GPU tests and checks, on a CUDA machine.",
        "",
        "| mutant | kind | the mistake | public tests | grader: points lost |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['id']}` | {r['kind']} | {r['why']} | "
            f"{'rejected' if r['public'] else '**survived**'} | {r['lost']:g} of {r['of']:g} |"
        )
    return "\n".join(lines) + "\n"


def readme_counts(readme: str) -> dict[str, tuple[int, int]]:
    """The ``CPU + GPU-only`` mutant counts the README's kill matrix states, per exercise."""
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    return {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^\| (ex\d) \| (\d+) \+ (\d+) \|", block, re.MULTILINE)
    }


GPU_RECORD = REPO_ROOT / "tests" / "kill_matrix_gpu.json"


def gpu_outcomes(junit: Path) -> dict[str, dict[str, str]]:
    """``{mutant id: {"public_tests": "rejected" | "not rejected", "grader": "loses points" |
    "keeps every point"}}`` from the junit XML of ``pytest tests -m gpu`` (``.ci/gpu mutants``):
    ``tests/test_corpus.py::test_mutant_loses_points[ID]`` passes when the public tests reject
    the mutant, ``tests/test_grader_corpus.py::test_mutant_loses_points[ID]`` when it loses points.
    A case that was skipped or did not run is left out."""
    import xml.etree.ElementTree as ET

    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(junit).iter("testcase"):
        found = re.fullmatch(r"test_mutant_loses_points\[(.+)\]", case.get("name", ""))
        side = {"tests.test_corpus": "public_tests", "tests.test_grader_corpus": "grader"}.get(
            case.get("classname", "")
        )
        if not found or side is None or case.find("skipped") is not None:
            continue
        passed = case.find("failure") is None and case.find("error") is None
        out.setdefault(found[1], {})[side] = (
            ("rejected" if passed else "not rejected")
            if side == "public_tests"
            else ("loses points" if passed else "keeps every point")
        )
    return out


def gpu_record(junit: Path, machine: str) -> dict:
    """The record ``--gpu-record`` writes: what was measured where, per GPU-only mutant; notes
    kept from the record it replaces only where the outcome is the same."""
    old = json.loads(GPU_RECORD.read_text(encoding="utf-8")) if GPU_RECORD.exists() else {"mutants": {}}
    found = gpu_outcomes(junit)
    record = {"machine": machine, "mutants": {}}
    for m in mutants.ALL:
        if not m.gpu or m.id not in found:
            continue
        entry = dict(found[m.id])
        before = old["mutants"].get(m.id, {})
        if {k: before.get(k) for k in entry} == entry and "note" in before:
            entry["note"] = before["note"]
        record["mutants"][m.id] = entry
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite README.md's table and tests/kill_matrix.md")
    parser.add_argument(
        "--secrets", type=int, metavar="N", help="official grading instead: every mutant under N fresh grading secrets"
    )
    parser.add_argument(
        "--gpu-record",
        metavar="JUNIT",
        type=Path,
        help="rewrite tests/kill_matrix_gpu.json from the junit XML of `bash .ci/gpu "
        "mutants` (pytest tests -m gpu) on a CUDA machine",
    )
    parser.add_argument(
        "--machine",
        default="",
        help="with --gpu-record: where it was measured (GPU, driver, torch, Python, commit, date)",
    )
    args = parser.parse_args(argv)
    if args.gpu_record:
        if not args.machine:
            parser.error("--gpu-record needs --machine: say where it was measured")
        record = gpu_record(args.gpu_record, args.machine)
        GPU_RECORD.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {GPU_RECORD} ({len(record['mutants'])} GPU-only mutants)")
        return 0
    if args.secrets:
        wrong = official(args.secrets)
        print(
            "\n".join(wrong)
            or f"every CPU mutant lost points under each of {args.secrets} secrets; "
            "the reference and the alternatives kept every point"
        )
        return 1 if wrong else 0
    rows = measure()
    table = summary(rows)
    print(table)
    survivors = [r["id"] for r in rows if not r["public"] or not r["lost"]]
    if args.write:
        readme = REPO_ROOT / "README.md"
        text = readme.read_text(encoding="utf-8")
        head, rest = text.split(BEGIN, 1)
        readme.write_text(f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")
        (REPO_ROOT / "tests" / "kill_matrix.md").write_text(details(rows), encoding="utf-8")
        record = [{k: r[k] for k in ("id", "failed_tests", "lost_checks")} for r in rows]
        (REPO_ROOT / "tests" / "kill_matrix.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if survivors:
        print(f"survivors: {survivors}", file=sys.stderr)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
