"""Every rule a check enforces is written where the student reads it: the stub's docstring.

For every probe of every check (public and hidden) that demands an error, the docstrings of what
the probe calls (the functions and classes of the exercise module it reaches, their methods
included) must name that error type and the argument the message has to name (or say "naming
the argument" for the argument at fault), shortly after a naming word: a name that only
appears in a formula is not a rule about the error's message); a probe that demands the "CUDA is needed" error must
find CUDA mentioned there. The test proves it can fail: a check demanding an unstated rule is
reported.
"""

from __future__ import annotations

import inspect
import re

import pytest

from coursekit.impl import Implementation
from grader import probes
from grader.exercises import load_probes
from grader.checks import Check, P
from grader.judge import MODULES, all_checks

STUBS = Implementation("exercises")
load_probes()
#: What a docstring may say instead of the argument's own name: the argument at fault, in general.
GENERIC = re.compile(r"naming\s+(the\s+argument|it\b|the\s+field|the\s+position)|names\s+the\s+(field|argument)")


def _reached(fn, seen: set[str] | None = None) -> set[str]:
    """The names a probe reads off the module under test (``mod.X``), through the probes'
    helper functions too."""
    seen = set() if seen is None else seen
    source = inspect.getsource(fn)
    names = set(re.findall(r"\bmod\.(\w+)", source))
    for helper in set(re.findall(r"\b(\w+)\(", source)):
        target = fn.__globals__.get(helper)
        ours = inspect.isfunction(target) and (
            target.__module__ == probes.__name__ or target.__module__.startswith("grader.exercises."))
        if helper not in seen and ours:
            seen.add(helper)
            names |= _reached(target, seen)
    return names


def docstrings(exercise: str, probe_name: str) -> str:
    module = STUBS.module(MODULES[exercise])
    texts = []
    for name in sorted(_reached(probes.PROBES[probe_name])):
        obj = getattr(module, name, None)
        if obj is None:
            continue
        texts.append(inspect.getdoc(obj) or "")
        if inspect.isclass(obj):
            texts += [inspect.getdoc(v) or "" for v in vars(obj).values() if callable(v) or isinstance(v, property)]
    return "\n".join(texts)


def _spelled(name: str) -> list[str]:
    """How a docstring may write an argument the message must name: ``inputs[1]`` is stated by
    a rule about ``inputs[i]``."""
    return [name, re.sub(r"\[\d+\]", "[i]", name)]


def _says_naming(doc: str, name: str) -> bool:
    """The docstring says that a message names ``name``: "naming ``name``", "naming ``a`` or
    ``name``", "whose message names ``name``"... (the name shortly after a naming word)."""
    for match in re.finditer(r"\bnam(e|es|ing)\b", doc):
        after = doc[match.end():match.end() + 160]
        if any(re.search(rf"(?<![\w.]){re.escape(s)}(?!\w)", after) for s in _spelled(name)):
            return True
    return False


def unstated(checks: list[Check]) -> list[str]:
    """What the checks demand that the docstrings do not say, one line each."""
    problems = []
    for check in checks:
        for probe in check.probes:
            if not probe.raises and not probe.cuda:
                continue
            doc = docstrings(check.exercise, probe.probe)
            where = f"{check.id} ({probe.label})"
            if not doc:
                problems.append(f"{where}: the probe reaches nothing documented in {MODULES[check.exercise]}")
                continue
            if probe.raises:
                if probe.error not in doc:
                    problems.append(f"{where}: demands {probe.error}; the docstring never says {probe.error}")
                if not (GENERIC.search(doc) or any(_says_naming(doc, r) for r in probe.raises)):
                    problems.append(f"{where}: the {probe.error} must name {' or '.join(probe.raises)}; "
                                    "the docstring names none of them")
            if probe.cuda and "CUDA" not in doc:
                problems.append(f"{where}: demands the 'a CUDA device is needed' error; the docstring "
                                "never mentions CUDA")
    return problems


def test_every_check_demands_only_what_the_docstrings_state():
    problems = unstated(all_checks())
    assert not problems, "checks demand rules the stubs' docstrings do not state:\n" + "\n".join(problems)


@pytest.mark.parametrize("error, names", [("KeyError", ("n_kernels",)), ("ValueError", ("bogus_argument",))])
def test_an_unstated_rule_is_caught(error, names):
    planted = Check("ex1", "planted", "a rule nobody wrote down",
                    [P("fit", "fit_launch_model([1, 1], [1.0, 2.0])", names, error=error,
                       n_kernels=[1, 1], step_ms=[1.0, 2.0])])
    assert unstated([planted]), f"a check demanding {error} naming {names} went unnoticed"
