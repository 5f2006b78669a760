"""The course notes (``notes/``): one English and one Chinese chapter per exercise.

What is checked, for every exercise of ``coursekit/course.py``'s ``EXERCISES``:

* its chapters exist, ``notes/en/NN-<module>.md`` and ``notes/zh/NN-<module>.md``, with the
  sections in the course's order (the idea, Predict first, what to observe, pitfalls, where it
  lives in vLLM, Hints, the answers); a Chinese heading carries the English name in brackets, so
  one rule finds the sections in both languages;
* every ```` ```python ```` block's ``>>>`` examples hold against the reference: they import the
  student's modules (``from exercises.buckets import ...``, so a student can run them once done),
  and here ``exercises.<module>`` is the reference's ``solutions.<module>``; run as one doctest per
  chapter, a mismatch fails naming the chapter, the line and the example;
* every figure in a chapter's prose (a number with a decimal point, or a number followed by a
  unit: µs, ms, s, GiB, GB, x, %, ...) is printed by one of that chapter's doctests, or is on the
  small allowlist below (each entry with its reason; figures of the bundled H200 run are read from
  ``coursekit/data/h200-anchor-2026-11-30.json``, never copied here). A figure left stale after
  the code or the data changed fails the test; ``test_a_stale_figure_is_caught`` proves it;
* the English and Chinese chapters print the same outputs and state the same figures;
* every vLLM pointer (file, function or class) is a row of the README's "Where it is in vLLM
  0.26.0" table, with README's runner (V1, V2 or both) where the chapter's table has that column;
  a paragraph naming what only vLLM's V1 GPU model runner does (``V1_ONLY``) says V1; and every
  lesson section a chapter names is a heading of the lesson (when the
  lesson's file is given: ``LAUNCH_TAX_LESSON=path/to/the/lesson.zh.md``; the course does not
  ship the lesson).

Run: ``python -m pytest tests/test_notes.py -q``.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import sys
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the doctests import ``solutions`` and ``coursekit``
    sys.path.insert(0, str(ROOT))

from coursekit.course import EXERCISES  # noqa: E402 - after the root is on sys.path (above)

NOTES = ROOT / "notes"
LANGS = ("en", "zh")
ANCHOR = ROOT / "coursekit" / "data" / "h200-anchor-2026-11-30.json"
LESSON = Path(os.environ.get("LAUNCH_TAX_LESSON", "")) if os.environ.get("LAUNCH_TAX_LESSON") else None

#: The sections of a chapter, in order: a ``## `` heading containing each word.
SECTIONS = ("The idea", "Predict", "What to observe", "Pitfalls", "Where it lives in vLLM", "Hints", "Answers")

#: Figures a chapter may state without printing them, and why. Keep it short: a figure that code
#: or data can produce belongs in a doctest.
ALLOWLIST = {
    "0.26.0": "the vLLM release the course follows (the README's table is of vLLM 0.26.0)",
}

#: Figures of the bundled H200 run (key path in the JSON: decimals quoted), allowed anywhere as
#: the JSON rounds them; read from the file, so a new measurement makes an old quote stale. The
#: chapters print these in doctests too; the index (notes/README.md) has no doctests and quotes them.
JSON_FIGURES = {
    "tau_eager_us": 2,  # the eager slope of the N-sweep: CPU cost of one launch
    "tau_graph_us": 1,  # the graph slope: GPU cost of one kernel node
    "decode7b.1.eager_ms": 1,  # the 7B-shaped decode step at batch 1, eager
    "decode7b.1.graph_ms": 2,  # ... as one graph
    "decode7b.1.speedup": 1,
}

UNITS = (
    "tok/s",
    "TB/s",
    "GB/s",
    "GiB",
    "MiB",
    "KiB",
    "GB",
    "MB",
    "KB",
    "µs",
    "μs",
    "us",
    "ms",
    "ns",
    "s",
    "x",
    "×",
    "%",
    "倍",
    "bytes",
    "字节",
    "毫秒",
    "微秒",
    "秒",
)
#: A number not glued to a Latin name, a path, a version's dot or a section sign (``§3.1``,
#: ``H200``, ``Qwen2.5``, ``ex1`` and ``fp32`` are names, not figures), with the unit after it if
#: any. A number right after a Chinese character (``约1.1 µs``) is a figure: only ASCII counts as
#: a name's letters.
FIGURE = re.compile(
    r"(?<![A-Za-z0-9_.§/\\\-])(\d+(?:\.\d+)*)(\s*(?:" + "|".join(map(re.escape, UNITS)) + r")(?![A-Za-z0-9/]))?"
)
NUMBER = re.compile(r"\d+(?:\.\d+)*")
FENCE = re.compile(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
PYTHON = re.compile(r"^[ \t]*```python[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
HEADING = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)
LESSON_REF = re.compile(r"「([^」]+)」")


def chapter(lang: str, exercise) -> Path:
    return NOTES / lang / f"{exercise.number:02d}-{exercise.module}.md"


CHAPTERS = [pytest.param(lang, e, id=f"{lang}/{e.number:02d}-{e.module}") for e in EXERCISES for lang in LANGS]


def _text(path: Path) -> str:
    if not path.is_file():
        pytest.fail(f"{path.relative_to(ROOT)} is missing (one chapter per exercise and language)", pytrace=False)
    return path.read_text(encoding="utf-8")


# --- doctests -----------------------------------------------------------------------------------


def python_blocks_only(text: str) -> str:
    """``text`` with every line outside a ```` ```python ```` block blanked, so doctest's line
    numbers are the file's."""
    keep = [""] * len(text.splitlines())
    for m in PYTHON.finditer(text):
        first = text.count("\n", 0, m.start(1))
        for i, line in enumerate(m.group(1).splitlines()):
            keep[first + i] = line
    return "\n".join(keep) + "\n"


def chapter_doctest(path: Path, text: str) -> doctest.DocTest:
    name = path.relative_to(ROOT).as_posix()
    return doctest.DocTestParser().get_doctest(python_blocks_only(text), {"__name__": "notes"}, name, str(path), 0)


def run_doctest(test: doctest.DocTest) -> tuple[int, str]:
    """Run ``test`` with ``exercises.<module>`` standing for ``solutions.<module>``."""
    import importlib

    import exercises

    saved = {}
    for e in EXERCISES:
        name = f"exercises.{e.module}"
        saved[name] = sys.modules.get(name), getattr(exercises, e.module, None)
        reference = importlib.import_module(f"solutions.{e.module}")
        sys.modules[name] = reference
        setattr(exercises, e.module, reference)
    try:
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
        outcome = runner.run(test, out=report.append, clear_globs=True)
        return outcome.failed, "".join(report)
    finally:
        for name, (module, attribute) in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
            short = name.split(".", 1)[1]
            if attribute is None:
                if hasattr(exercises, short):
                    delattr(exercises, short)
            else:
                setattr(exercises, short, attribute)


# --- figures in the prose -----------------------------------------------------------------------


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def prose(text: str) -> str:
    """What a reader reads as text, at the same offsets: fenced blocks, HTML comments and quoted
    lesson headings (``「3.1 launch-overhead 模型」`` names a section, checked against the lesson)
    blanked out."""
    text = FENCE.sub(_blank, text)
    text = re.sub(r"<!--.*?-->", _blank, text, flags=re.DOTALL)
    return LESSON_REF.sub(_blank, text)


def _value(token: str):
    """A number as compared: a Decimal (``5`` equals ``5.0``), or the string of a version."""
    return Decimal(token) if token.count(".") <= 1 else token


def figure_matches(text: str) -> list[re.Match]:
    """The figures a chapter's prose states: each number with a decimal point or a unit after
    it (match offsets are the text's)."""
    return [m for m in FIGURE.finditer(prose(text)) if "." in m.group(1) or m.group(2)]


def figures(text: str) -> list[tuple[int, str]]:
    """(line, number) for each figure of ``figure_matches``."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in figure_matches(text)]


def _json_figures() -> set:
    data = json.loads(ANCHOR.read_text(encoding="utf-8"))
    allowed = set()
    for key, decimals in JSON_FIGURES.items():
        value = data
        for part in key.split("."):
            value = value[part]
        allowed.add(Decimal(f"{value:.{decimals}f}"))
    return allowed


def allowed_figures(test: doctest.DocTest | None) -> set:
    allowed = {_value(k) for k in ALLOWLIST} | _json_figures()
    for example in test.examples if test is not None else ():
        allowed |= {_value(t) for t in NUMBER.findall(example.want)}
        if example.exc_msg:
            allowed |= {_value(t) for t in NUMBER.findall(example.exc_msg)}
    return allowed


def stale_figures(path: Path, text: str) -> list[str]:
    """The figures of a chapter that neither its doctests' outputs nor the allowlist hold."""
    allowed = allowed_figures(chapter_doctest(path, text))
    return [f"line {line}: {number}" for line, number in figures(text) if _value(number) not in allowed]


# --- the tests ----------------------------------------------------------------------------------


def sections(text: str) -> list[tuple[str, str]]:
    """The ``## `` sections of a chapter outside code blocks: (heading, body)."""
    blanked = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found = list(HEADING.finditer(blanked))
    return [
        (m.group(1), blanked[m.end() : found[i + 1].start() if i + 1 < len(found) else None])
        for i, m in enumerate(found)
    ]


@pytest.mark.parametrize("lang, exercise", CHAPTERS)
def test_chapter_has_its_sections_in_order(lang, exercise):
    path = chapter(lang, exercise)
    text = _text(path)
    found = sections(text)
    headings = [h for h, _ in found]
    where = []
    for section in SECTIONS:
        hits = [i for i, h in enumerate(headings) if section.lower() in h.lower()]
        assert hits, f"{path.relative_to(ROOT)}: no '## ' heading with {section!r} (headings: {headings})"
        where.append(hits[0])
    assert where == sorted(where), (
        f"{path.relative_to(ROOT)}: sections out of order; expected {SECTIONS}, got headings {headings}"
    )
    questions = re.findall(r"^\d+\. ", found[where[1]][1], re.MULTILINE)
    assert 2 <= len(questions) <= 3, (
        f"{path.relative_to(ROOT)}: the Predict section asks {len(questions)} numbered questions, expected 2 or 3"
    )
    answers = found[where[-1]][1]
    assert answers.count("<details>") == len(questions), (
        f"{path.relative_to(ROOT)}: each Predict question needs its answer in a <details> block "
        f"of the answers section ({len(questions)} questions, {answers.count('<details>')} answers)"
    )


@pytest.mark.parametrize("lang, exercise", CHAPTERS)
def test_chapter_doctests_hold_against_the_reference(lang, exercise):
    path = chapter(lang, exercise)
    test = chapter_doctest(path, _text(path))
    assert test.examples, f"{path.relative_to(ROOT)} has no >>> examples in its ```python blocks"
    failed, report = run_doctest(test)
    if failed:
        pytest.fail(
            f"{path.relative_to(ROOT)}: {failed} example(s) no longer print what the "
            f"chapter says (fix the chapter, or the code):\n{report}",
            pytrace=False,
        )


@pytest.mark.parametrize("lang, exercise", CHAPTERS)
def test_every_figure_in_the_prose_is_printed_by_a_doctest(lang, exercise):
    path = chapter(lang, exercise)
    stale = stale_figures(path, _text(path))
    assert not stale, (
        f"{path.relative_to(ROOT)} states figures that none of its doctests prints "
        f"(stale, or add a doctest that prints them): {stale}"
    )


def test_the_index_links_every_chapter_and_states_no_stale_figure():
    index = NOTES / "README.md"
    text = _text(index)
    for e in EXERCISES:
        for lang in LANGS:
            link = chapter(lang, e).relative_to(NOTES).as_posix()
            assert f"({link})" in text, f"notes/README.md does not link {link}"
    allowed = allowed_figures(None)
    stale = [f"line {line}: {n}" for line, n in figures(text) if _value(n) not in allowed]
    assert not stale, f"notes/README.md states figures neither the allowlist nor the JSON holds: {stale}"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: f"{e.number:02d}-{e.module}")
def test_english_and_chinese_chapters_agree(exercise):
    en, zh = (chapter(lang, exercise) for lang in LANGS)
    en_text, zh_text = _text(en), _text(zh)
    en_out = [x.want for x in chapter_doctest(en, en_text).examples]
    zh_out = [x.want for x in chapter_doctest(zh, zh_text).examples]
    assert en_out == zh_out, f"{zh.name}: the Chinese chapter's doctests print other outputs than the English one's"
    en_fig = {_value(n) for _, n in figures(en_text)}
    zh_fig = {_value(n) for _, n in figures(zh_text)}
    assert en_fig == zh_fig, (
        f"{exercise.module}: figures only in English {sorted(map(str, en_fig - zh_fig))}, "
        f"only in Chinese {sorted(map(str, zh_fig - en_fig))}"
    )


#: The runner column's values: which of vLLM 0.26.0's two GPU model runners a pointer holds for
#: (the Chinese chapters write "both" as 两者).
RUNNERS = {"V1": "V1", "V2": "V2", "both": "both", "两者": "both"}


def _readme_vllm_map() -> dict[tuple[str, str], str]:
    """README's "Where it is in vLLM 0.26.0" table: (file, name) -> its runner (V1, V2, both)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- vllm-map -->", 1)[1].split("<!-- /vllm-map -->", 1)[0]
    pairs = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[2].startswith("`vllm/"):
            for name in re.findall(r"`([^`]+)`", cells[3]):
                pairs[(cells[2].strip("`"), name)] = cells[4]
    return pairs


def _vllm_section(text: str) -> str | None:
    section = re.search(r"^## [^\n]*Where it lives in vLLM[^\n]*\n(.*?)(?=^## )", text, re.DOTALL | re.MULTILINE)
    return section.group(1) if section else None


@pytest.mark.parametrize("lang, exercise", CHAPTERS)
def test_vllm_pointers_are_rows_of_the_readme_table(lang, exercise):
    """Each (file, name) a chapter's "Where it lives in vLLM" table points at is a row of README's
    table; where the chapter's table has a runner column, it says README's runner for the row."""
    path = chapter(lang, exercise)
    text = _text(path)
    section = _vllm_section(text)
    assert section is not None, f"{path.relative_to(ROOT)}: no 'Where it lives in vLLM' section"
    known = _readme_vllm_map()
    pairs, runners, has_runner = [], [], False
    for row in section.splitlines():
        if not row.lstrip().startswith("|"):
            continue
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if cells and cells[-1] == "runner":
            has_runner = True
        at = next((i for i, c in enumerate(cells) if re.fullmatch(r"`vllm/[^`]+\.py`", c)), None)
        if at is None:
            continue
        names = re.findall(r"`([^`]+)`", cells[at + 1]) if at + 1 < len(cells) else []
        assert names, f"{path.relative_to(ROOT)}: a vLLM row without a name: {row}"
        row_pairs = [(cells[at].strip("`"), n) for n in names]
        pairs += row_pairs
        if has_runner:
            runner = RUNNERS.get(cells[-1])
            runners += [(p, cells[-1], known.get(p)) for p in row_pairs if runner != known.get(p)]
    assert pairs, f"{path.relative_to(ROOT)}: no table row of (file, name) under 'Where it lives in vLLM'"
    unknown = [p for p in pairs if p not in known]
    assert not unknown, (
        f"{path.relative_to(ROOT)}: vLLM pointers not in README.md's 'Where it is in vLLM 0.26.0' table: {unknown}"
    )
    assert not runners, f"{path.relative_to(ROOT)}: (pointer, runner here, README's runner) that disagree: {runners}"


#: Names of what only vLLM 0.26.0's V1 GPU model runner does (its dispatcher, its mode filters, its
#: capture guard, its graph memory estimate and the log line it prints, its size rounding for
#: speculative decoding). A paragraph (or a table row) of the notes, or of README's vLLM section,
#: that names one must say which runner it means: "V1" (or, for ``profile_cudagraph_memory``, which
#: V2 has too and makes return 0, "V1" or "V2").
V1_ONLY = {
    "CudagraphDispatcher": ("V1",),
    "valid_modes": ("V1",),
    "invalid_modes": ("V1",),
    "set_cudagraph_capturing_enabled": ("V1",),
    "adjust_cudagraph_sizes_for_spec_decode": ("V1",),
    "Estimated CUDA graph memory": ("V1",),
    "profile_cudagraph_memory": ("V1", "V2"),
}
RUNNER_NOTES = sorted(NOTES.rglob("*.md"))


def _readme_vllm_part() -> str:
    """README's vLLM section: the table and the paragraph after it (the rest is generated)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- vllm-map -->")
    return readme[start : readme.index("\n## ", start)]


def unlabelled_runner_claims(text: str) -> list[str]:
    """The paragraphs and table rows of ``text`` (fenced code left out) that name a V1-only term
    of ``V1_ONLY`` without saying which runner they mean."""
    prose = FENCE.sub("", text)
    units = []
    for para in re.split(r"\n[ \t]*\n", prose):
        lines = para.splitlines()
        rows = [line for line in lines if line.lstrip().startswith("|")]
        units += rows
        rest = "\n".join(line for line in lines if not line.lstrip().startswith("|"))
        if rest.strip():
            units.append(rest)
    bad = []
    for unit in units:
        for term, labels in V1_ONLY.items():
            if term in unit and not any(re.search(rf"(?<![A-Za-z0-9]){label}(?![0-9])", unit) for label in labels):
                bad.append(f"{term!r} without {' or '.join(labels)}: {' '.join(unit.split())[:160]}")
    return bad


@pytest.mark.parametrize("path", RUNNER_NOTES + [ROOT / "README.md"], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_v1_only_claim_says_v1(path):
    """vLLM 0.26.0 has two GPU model runners and gives most dense models V2: a sentence about what
    only V1 does (``V1_ONLY``) must say V1 in its paragraph, or it reads as what vLLM does."""
    text = _readme_vllm_part() if path.name == "README.md" and path.parent == ROOT else _text(path)
    bad = unlabelled_runner_claims(text)
    assert not bad, f"{path.relative_to(ROOT)}: say which runner:\n" + "\n".join(bad)


def test_an_unlabelled_v1_claim_is_caught():
    """The check above can fail: chapter 8's V1-only sentence, with its "V1" taken out, is caught."""
    text = _text(NOTES / "en" / "08-engine.md")
    assert not unlabelled_runner_claims(text)
    row = next(line for line in text.splitlines() if "set_cudagraph_capturing_enabled" in line)
    broken = text.replace(row, row.rsplit("|", 2)[0] + "| |")
    assert any("set_cudagraph_capturing_enabled" in b for b in unlabelled_runner_claims(broken))
    sentence = "Only the V1 runner estimates `profile_cudagraph_memory`."
    assert not unlabelled_runner_claims(sentence)
    assert unlabelled_runner_claims(sentence.replace("the V1 runner", "vLLM"))
    assert unlabelled_runner_claims("vLLM filters with `valid_modes`.\n\nThe V1 runner does.")


@pytest.mark.parametrize("lang, exercise", CHAPTERS)
def test_the_lesson_sections_named_are_the_lessons_headings(lang, exercise):
    path = chapter(lang, exercise)
    text = _text(path)
    line = next((row for row in text.splitlines() if row.startswith(("**From the lesson", "**出自课文"))), None)
    assert line, f"{path.relative_to(ROOT)}: no '**From the lesson:**' line naming the lesson's section"
    named = LESSON_REF.findall(line)
    assert named, f"{path.relative_to(ROOT)}: name the lesson's sections in 「」: {line}"
    if LESSON is None or not LESSON.is_file():
        pytest.skip("the lesson's headings: set LAUNCH_TAX_LESSON to the lesson's file (not shipped)")
    headings = {
        row.rstrip().rstrip("¶").strip().replace("`", "")
        for row in LESSON.read_text(encoding="utf-8").splitlines()
        if row.rstrip().endswith("¶")
    }
    missing = [h for h in named if h.replace("`", "") not in headings]
    assert not missing, f"{path.relative_to(ROOT)}: not headings of the lesson: {missing}"


def test_a_stale_figure_is_caught(tmp_path):
    """Change a figure in a copy of chapter 1, in the prose and then in a doctest's output: the
    figure check and the doctest each fail."""
    source = chapter("en", EXERCISES[0])
    text = _text(source)
    assert not stale_figures(source, text)
    # In the prose: the first figure with a decimal point gets one more digit.
    m = next(m for m in figure_matches(text) if "." in m.group(1))
    changed = m.group(1) + "9"
    copy = tmp_path / source.name
    copy.write_text(text[: m.start(1)] + changed + text[m.end(1) :], encoding="utf-8")
    stale = stale_figures(source, copy.read_text(encoding="utf-8"))
    assert any(s.endswith(f": {changed}") for s in stale), f"{changed} went unnoticed: {stale}"
    # In a doctest's output: the first decimal figure an example prints.
    example = next(x for x in chapter_doctest(source, text).examples if re.search(r"\d\.\d", x.want))
    lines = text.splitlines(keepends=True)
    at = example.lineno + example.source.count("\n")  # the want's first line (0-based)
    old = re.search(r"\d+\.\d+", "".join(lines[at:])).group(0)
    lines[at:] = ["".join(lines[at:]).replace(old, old + "9", 1)]
    failed, report = run_doctest(chapter_doctest(source, "".join(lines)))
    assert failed and old + "9" in report, f"a changed doctest output {old}9 went unnoticed"


#: Code whose docstrings students and staff read beside the notes.
DOCSTRING_FILES = sorted(
    [*(ROOT / "exercises").glob("*.py"), *(ROOT / "coursekit").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
)


def unlabelled_docstrings(source: str) -> list[str]:
    """The docstrings of ``source`` (module, classes, functions) that name a V1-only term of
    ``V1_ONLY`` and never say which runner they mean (a docstring is read whole: its first lines
    usually name the runner once for all of it)."""
    import ast

    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node) or ""
            flat = " ".join(doc.split())
            if unlabelled_runner_claims(flat):
                bad.append(f"{getattr(node, 'name', 'the module')}: {unlabelled_runner_claims(flat)[0][:120]}")
    return bad


@pytest.mark.parametrize("path", DOCSTRING_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_docstring_says_which_runner(path):
    """A docstring about something only vLLM's V1 runner does says V1 (issue 34): the exercises,
    the course kit and the benchmarks."""
    bad = unlabelled_docstrings(path.read_text(encoding="utf-8"))
    assert not bad, f"{path.relative_to(ROOT)}: say which runner in these docstrings:\n" + "\n".join(bad)


def test_an_unlabelled_docstring_is_caught():
    source = (ROOT / "exercises" / "dispatch.py").read_text(encoding="utf-8")
    assert not unlabelled_docstrings(source)
    broken = source.replace("in vLLM 0.26.0's V1 GPU model runner", "in vLLM 0.26.0")
    assert broken != source and any("CudagraphDispatcher" in b for b in unlabelled_docstrings(broken))
