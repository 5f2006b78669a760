"""Checks: what the judge asks a submission (probes) and how it judges the answers.

A check is a list of probes (``grader/probes.py``) and a rule. The judge runs every probe on the
submission (in a sandboxed worker) and on the reference (itself), then compares answer by answer:
by default the submission's answer must equal the reference's (floats to ~1e-9 relative, tensors
with ``allclose``); a probe that expects an error needs that error with a message naming the
argument; a few probes judge a property instead (a timer's result inside the window the probe
measured around the calls, a message that says a CUDA device is needed).

Inputs are drawn (``grader/secret.py``): each check builds its probes from ``draw.rng(its
name)``, so official grading asks what no student could know in advance, and practice mode asks
the release's fixed inputs. A draw picks values, never which cases are asked: every case that
tells a rule from a plausible wrong one (a boundary, no padding needed, slots out of order, two
different counts where one could be hard-coded) is in every draw, or a wrong answer would pass
on some draws (the staff repository grades its wrong answers under many fresh secrets to find
such a draw). No check passes on rejection alone: every check whose probes expect
an error also carries a valid input, which must be accepted (``acceptance()``: its value is the
business of the exercise's other checks; capture, which has no valid input without CUDA, pairs
two different errors instead).

This file holds what every check shares: probes, answers, checks and the ways to compare. Each
exercise's own probes and public checks sit together in ``grader/exercises/<module>.py`` (its
hidden checks: the staff repository's, never released); ``grader/exercises/__init__.py`` finds
them from the course's declaration (``coursekit/course.py``). A check carries its own points
(``points=``); ``grader/rubric.toml`` states the course's total they must add up to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from coursekit.checks import names_argument


@dataclass(frozen=True)
class Probe:
    probe: str
    args: dict
    label: str
    raises: tuple[str, ...] = ()  # an expected error: its message must name one of these
    error: str = "ValueError"
    last: bool = False  # runs after every other probe of its worker (a failing capture)

    @property
    def needs_reference(self) -> bool:
        """Judged against the reference's answer (not an expected error, not a property)."""
        return not self.raises

    def key(self) -> str:
        import json

        return json.dumps([self.probe, self.args], sort_keys=True, default=str)


@dataclass
class Answer:
    ok: bool
    value: Any = None
    error: dict | None = None  # {"types": [class names along the MRO], "message": str}


#: ``compare(probe, submission_answer, reference_answer) -> problem or None``
Compare = Callable[[Probe, Answer, Answer], "str | None"]


@dataclass
class Check:
    exercise: str
    name: str
    rule: str
    probes: list[Probe]
    compare: Compare | None = None
    gpu: bool = False
    hidden: bool = False
    triton: bool = False  # needs torch.compile to build GPU kernels (a C compiler, Python.h, libcuda)
    points: float = 0  # what the check is worth; the course's total is grader/rubric.toml's
    #: The lesson's idea its points reward (README, points by idea); "" is its exercise's own
    #: (coursekit/course.py); ``course.ARGUMENTS`` (refusing bad arguments) is worth no points.
    idea: str = ""

    @property
    def id(self) -> str:
        return f"{self.exercise}.{self.name}"


# ----------------------------------------------------------------------------- comparing


def short(value: Any, limit: int = 160) -> str:
    if isinstance(value, torch.Tensor):
        text = (
            f"tensor{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} "
            f"{value.flatten()[:6].tolist()}{'...' if value.numel() > 6 else ''}"
        )
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def string_difference(got: str, expected: str, context: int = 30) -> str:
    """Where two different strings part: the first character that differs (or where the shorter
    ends), its line, and both strings around it, so that a long text's difference is shown, not
    a shared beginning cut short."""
    at = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
    start = max(0, at - context)
    dots = "..." if start else ""
    return (
        f"the text differs from character {at} (line {expected.count(chr(10), 0, at) + 1}): "
        f"expected {dots}{expected[start : at + context]!r}, got {dots}{got[start : at + context]!r} "
        f"({len(expected)} and {len(got)} characters)"
    )


def differs(got: Any, expected: Any, rel: float, abs_: float, rtol: float, atol: float) -> str | None:
    """Why ``got`` is not ``expected`` (types must match exactly), or None."""
    if type(got) is not type(expected):
        return f"expected {short(expected)} ({type(expected).__name__}), got {short(got)} ({type(got).__name__})"
    if isinstance(expected, str) and got != expected and repr(expected) != short(expected):
        return string_difference(got, expected)  # a cut-short text might show no difference
    if isinstance(expected, float):
        if math.isnan(expected) and math.isnan(got):
            return None
        if not math.isclose(got, expected, rel_tol=rel, abs_tol=abs_):
            return f"expected {expected!r}, got {got!r}"
        return None
    if isinstance(expected, torch.Tensor):
        if got.dtype != expected.dtype or got.shape != expected.shape:
            return f"expected {short(expected)}, got {short(got)}"
        if got.dtype.is_floating_point:
            ok = torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = torch.equal(got, expected)
        if not ok:
            bad = (got.double() - expected.double()).abs().nan_to_num(float("inf")).max().item()
            return f"expected {short(expected)}, got {short(got)} (max difference {bad:.3g})"
        return None
    if isinstance(expected, (list, tuple)):
        if len(got) != len(expected):
            return f"expected {len(expected)} items {short(expected)}, got {len(got)} {short(got)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = differs(g, e, rel, abs_, rtol, atol)
            if problem:
                return f"[{i}]: {problem}"
        return None
    if isinstance(expected, dict):
        if set(got) != set(expected):
            return f"expected keys {sorted(expected)}, got {sorted(got)}"
        for k in expected:
            problem = differs(got[k], expected[k], rel, abs_, rtol, atol)
            if problem:
                return f"[{k!r}]: {problem}"
        return None
    return None if got == expected else f"expected {short(expected)}, got {short(got)}"


def raised(answer: Answer) -> str:
    types, message = answer.error["types"], answer.error["message"]
    if "NotImplementedError" in types and message.startswith("exercise "):  # a stub's own
        return f"not implemented yet ({message})"
    if "AttributeError" in types and "has no attribute" in message:
        return f"missing: {message[:200]}"
    return f"raised {types[0]}: {message[:200]}"


def same(
    keys: tuple[str, ...] = (), rel: float = 1e-9, abs_: float = 1e-12, rtol: float = 1e-5, atol: float = 1e-6
) -> Compare:
    """The submission answers as the reference does (only ``keys`` of a dict answer, if given)."""

    def compare(probe: Probe, got: Answer, expected: Answer) -> str | None:
        if probe.raises:
            return expects_error(probe, got)
        if expected is None:
            raise RuntimeError(f"no reference answer for probe {probe.label}")
        if not expected.ok:
            raise RuntimeError(f"the reference failed probe {probe.label}: {expected.error}")
        if not got.ok:
            return f"{probe.label} {raised(got)}"
        g, e = got.value, expected.value
        if keys:
            if not isinstance(g, dict):
                return f"{probe.label}: got {short(g)}"
            for k in keys:
                problem = differs(g.get(k), e.get(k), rel, abs_, rtol, atol)
                if problem:
                    return f"{probe.label}, {k}: {problem}"
            return None
        problem = differs(g, e, rel, abs_, rtol, atol)
        return f"{probe.label}: {problem}" if problem else None

    compare.needs_reference = True
    return compare


def expects_error(probe: Probe, got: Answer) -> str | None:
    names = " or ".join(repr(n) for n in probe.raises)
    if got.ok:
        return f"{probe.label}: expected {probe.error} naming {names}, nothing was raised"
    if "NotImplementedError" in got.error["types"] and got.error["message"].startswith("exercise "):
        return f"{probe.label} {raised(got)}"
    if probe.error not in got.error["types"]:
        return f"{probe.label}: expected {probe.error} naming {names}, {raised(got)}"
    if not any(names_argument(got.error["message"], n) for n in probe.raises):
        return f"{probe.label}: the {probe.error} does not name {names}: {got.error['message'][:200]!r}"
    return None


def P(
    probe: str, label: str, raises: tuple[str, ...] | str = (), error: str = "ValueError", last: bool = False, **args
) -> Probe:
    """A probe of ``probe`` with ``args``; ``raises``: the argument names an expected error must
    name (``error``: its type). Refusing bad arguments and saying that a CUDA device is needed
    are given code (coursekit/argcheck.py), which no check grades."""
    return Probe(probe, args, label, (raises,) if isinstance(raises, str) else tuple(raises), error, last)
