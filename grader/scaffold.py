"""``python -m grader new-exercise MODULE --title TITLE``: the files of a new exercise, to fill.

It appends the exercise's declaration to ``coursekit/course.py`` (the next number) and writes,
each with one example to replace:

* ``exercises/<module>.py``, the stub (its first line the heading the declaration states; its
  docstring's ``>>>`` examples are tested);
* ``solutions/<module>.py``, the reference;
* ``grader/exercises/<module>.py`` (probes and public checks, each with its points:
  ``exercises/tests/test_checks.py`` runs each public check as a public test) and
  ``grader/hidden/<module>.py``;
* ``tests/alternatives/<module>.py`` and ``tests/mutants/<module>.py`` (which the corpus test
  says is too small until it holds 10 mutants);
* ``notes/en/NN-<module>.md`` and ``notes/zh/NN-<module>.md``, its chapter of the course notes
  (the sections tests/test_notes.py asks for, each to fill).

It refuses a module name that is not a Python identifier or that an exercise already has, and
writes nothing over an existing file. What to do next is printed: fill each file, give the checks
their points (and ``grader/rubric.toml``'s ``[course] total`` its new value), then ``python -m
grader build`` and the suite.
Staff only: a release leaves it out.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from coursekit.course import EXERCISES


class ScaffoldError(ValueError):
    """The new exercise cannot be written as asked (the message says why)."""


def _files(n: int, module: str, title: str) -> dict[str, str]:
    marker = f"ex{n}"
    return {
        f"exercises/{module}.py": f'''\
"""Exercise {n} · {title}.

Check your work with ``python -m pytest exercises -m {marker}``.
"""

from __future__ import annotations

from coursekit import argcheck


def example(x: float) -> float:
    """Twice ``x``, a float. ``x`` negative, NaN, infinite or not a number (a bool is not) ->
    ValueError naming ``x`` (the given line checks it).

    >>> example(1.5)
    3.0
    """
    x = argcheck.number("x", x)  # given: the argument check (coursekit/argcheck.py)
    raise NotImplementedError("exercise {n}: example")
''',
        f"solutions/{module}.py": f'''\
"""Exercise {n} reference: {title}. Rules: exercises/{module}.py."""

from __future__ import annotations

from coursekit import argcheck


def example(x: float) -> float:
    x = argcheck.number("x", x)  # given: the argument check (coursekit/argcheck.py)
    return 2.0 * x
''',
        f"grader/exercises/{module}.py": f'''\
"""Exercise {n} ({module}): the probes a worker runs on the submission's ``{module}`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.checks import Check, P
from grader.probes import call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def {module}_example(mod, x: float):
    return call(mod.example, x)


# ------------------------------------------------------------------------- checks


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("{marker}.example")
    xs = [0.0, round(r.uniform(0, 100), 3)]
    return [
        Check("{marker}", "example", "twice x, a float",
              [P("{module}_example", f"example({{x}})", x=x) for x in xs], points=1),
    ]
''',
        f"grader/hidden/{module}.py": f'''\
"""Exercise {n} ({module}): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.checks import Check

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    return []  # Check("{marker}", name, rule, probes, hidden=True, points=...)
''',
        f"tests/alternatives/{module}.py": f'''\
"""Exercise {n}, solved another way: (say how it differs from the reference)."""


from coursekit import argcheck


def example(x):
    return argcheck.number("x", x) + argcheck.number("x", x)
''',
        f"notes/en/{n:02d}-{module}.md": f"""# Chapter {n} · {title}

Exercise {n} · `exercises/{module}.py` · marker `{marker}` (replace: what it is, where it runs)

## The idea

(replace: the idea, in your words.)

**From the lesson:** 「(replace: the lesson's section heading)」

## Predict first

1. (replace: a question to answer before coding)
2. (replace: another)

## What to observe

(replace: what running it shows; every figure printed by a doctest below.)

```python
>>> from exercises.{module} import example
>>> example(2)
4
```

## Pitfalls

- (replace: the mistakes students make)

## Where it lives in vLLM 0.26.0

(replace: rows of the README's table.)

## Hints

1. (replace: the recipe, step by step)

## Answers to Predict first

<details><summary>1</summary>(replace)</details>

<details><summary>2</summary>(replace)</details>
""",
        f"notes/zh/{n:02d}-{module}.md": f"""# 第 {n} 章 · {title}

练习 {n} · `exercises/{module}.py` · 标记 `{marker}`（替换：它是什么，在哪里运行）

## 思路（The idea）

（替换：思路。）

**出自课文：** 「（替换：课文的小节标题）」

## 先预测（Predict first）

1. （替换：写代码前先回答的问题）
2. （替换：另一个）

## 运行时看什么（What to observe）

```python
>>> from exercises.{module} import example
>>> example(2)
4
```

## 常见错误（Pitfalls）

- （替换）

## 在 vLLM 0.26.0 中的位置（Where it lives in vLLM 0.26.0）

（替换：README 表格中的行。）

## 提示（Hints）

1. （替换：步骤）

## 预测题答案（Answers）

<details><summary>1</summary>（替换）</details>

<details><summary>2</summary>（替换）</details>
""",
        f"tests/mutants/{module}.py": f'''\
"""Exercise {n} ({module}): plausible wrong versions of ``solutions/{module}.py``."""

from tests.mutants import M

MUTANTS = [
    M("{module}", "adds-one", "x + 1 instead of twice x",
      ("    return 2.0 * x", "    return x + 1.0")),
]
''',
    }


def new_exercise(root: Path, module: str, title: str) -> list[str]:
    """Write the new exercise's files under ``root``; return the paths written (relative)."""
    if not module.isidentifier() or keyword.iskeyword(module) or module != module.lower():
        raise ScaffoldError(f"module: expected a lower-case Python name such as 'kv_cache', got {module!r}")
    if any(e.module == module for e in EXERCISES):
        raise ScaffoldError(f"module: exercise {module!r} exists already (coursekit/course.py)")
    title = " ".join(title.split()).rstrip(".")
    if not title:
        raise ScaffoldError("title: expected a few words, such as 'a KV cache with paged blocks'")
    n = len(EXERCISES) + 1
    files = _files(n, module, title)
    taken = [rel for rel in files if (root / rel).exists()]
    if taken:
        raise ScaffoldError(f"{taken[0]} exists already: nothing was written")
    course = root / "coursekit" / "course.py"
    text = course.read_text(encoding="utf-8")
    end = re.search(r"\n\)\n\nMODULES = ", text)
    if end is None:
        raise ScaffoldError("coursekit/course.py: the EXERCISES tuple's end was not found")
    entry = (
        f'\n    Exercise({n}, "{module}", "{title}",'
        '\n             "`example` (replace: what the student implements)", "CPU",'
        f'\n             "{title} (replace: the lesson\'s idea its points reward)"),'
    )
    course.write_text(text[: end.start()] + entry + text[end.start() :], encoding="utf-8")
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content, encoding="utf-8")
    return ["coursekit/course.py", *files]


NEXT = """\
Next: replace each file's example with the exercise (the stub's docstring states every rule the
checks enforce), give its checks their points (points= on each check) and grader/rubric.toml's
[course] total its new value, write 10 or more mutants (and, for property tests and teaching messages beyond the
checks, exercises/tests/test_<module>.py with pytestmark = pytest.mark.{marker}; argument checks
are given: the stub calls coursekit/argcheck.py in lines marked # given, their tests are marked given
and no check grades them), then:
  python -m grader build
  python -m pytest exercises -m {marker} --impl solutions   (passes)   and without --impl (fails)
  python -m tests.kill_matrix --write
  python -m pytest tests -n auto"""


def main(module: str, title: str, root: Path, say=print) -> int:
    written = new_exercise(root, module, title)
    say(f"exercise {len(EXERCISES) + 1} ({module}): wrote or extended")
    for rel in written:
        say(f"  {rel}")
    say(NEXT.format(marker=f"ex{len(EXERCISES) + 1}"))
    return 0
