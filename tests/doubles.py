"""Test doubles take exactly the parameters of what they stand in for.

On the H200 every grader-corpus GPU case died in ``tests/warm_worker.py``: ``WarmWorker.run() got
an unexpected keyword argument 'device'``. ``sandbox.run`` had gained ``device=`` when GPUs were
leased, its stand-in had not, and no CPU run ever passed a device. So a double is compared with
the real thing when it is made, on every machine:

* ``monkeypatch.setattr`` in this suite (``tests/conftest.py``) refuses a callable that replaces
  a function of the project (``grader``, ``coursekit``, ``solutions``, ``exercises``,
  ``benchmarks``) unless its parameters are the function's;
* a double put in place some other way says what it stands in for with ``@stands_in_for(...)``,
  checked as it is defined; ``DOUBLES`` lists them, and ``tests/test_doubles.py`` checks them
  and the ``torch.cuda`` stand-ins of ``tests/fake_cuda`` again.

"The same parameters": the same names, in the same order, of the same kinds (positional,
keyword-only, ``*args``, ``**kwargs``), each with a default exactly where the original has one.
Defaults' values and annotations may differ.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

PROJECT = ("grader", "coursekit", "solutions", "exercises", "benchmarks")

#: ``(double, original)`` for every ``@stands_in_for`` double defined so far.
DOUBLES: list[tuple[Callable, Callable]] = []


def _parameters(fn: Callable, drop_self: bool = False) -> list[tuple[str, str, bool]]:
    params = list(inspect.signature(fn).parameters.values())
    if drop_self and params and params[0].name == "self":
        params = params[1:]
    return [(p.name, p.kind.description, p.default is not p.empty) for p in params]


def differs(double: Callable, original: Callable, method: bool = False) -> str | None:
    """Why ``double`` does not take ``original``'s parameters, or None. ``method``: ``double`` is
    a method defined in a class body (its ``self`` is not a parameter of the original)."""
    want, got = _parameters(original), _parameters(double, drop_self=method)
    if want == got:
        return None

    def show(params):
        return ", ".join(f"{name}{'=…' if default else ''} ({kind})" for name, kind, default in params)

    missing = [p[0] for p in want if p[0] not in {g[0] for g in got}]
    extra = [p[0] for p in got if p[0] not in {w[0] for w in want}]
    detail = "; ".join(
        filter(
            None,
            [
                f"missing {', '.join(missing)}" if missing else "",
                f"not in the original: {', '.join(extra)}" if extra else "",
            ],
        )
    )
    return f"{_name(double)} stands in for {_name(original)} but takes ({show(got)}), not ({show(want)})" + (
        f": {detail}" if detail else ""
    )


def _name(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def is_project_function(value: Any) -> bool:
    """A function or method defined in one of the project's packages."""
    function = getattr(value, "__func__", value)
    return inspect.isfunction(function) and (getattr(function, "__module__", "") or "").split(".")[0] in PROJECT


def stands_in_for(original: Callable) -> Callable[[Callable], Callable]:
    """Mark a double of ``original``: a ``TypeError`` at once when its parameters differ. A method
    (a function whose first parameter is ``self``) is compared without ``self``."""

    def mark(double: Callable) -> Callable:
        method = next(iter(inspect.signature(double).parameters), None) == "self"
        problem = differs(double, original, method=method)
        if problem:
            raise TypeError(problem)
        DOUBLES.append((double, original))
        return double

    return mark
