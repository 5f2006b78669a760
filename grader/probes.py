"""Probes: the calls a worker makes on a submission's module, returning plain data.

A probe knows *what to call*, never what the answer should be: the judge runs the same probe on
the reference (in its own process) and compares. Each probe is ``name(module, **args)`` and
returns values ``grader.runtime.wire`` can encode; it normalizes only what the spec leaves open (a
``Counter`` or a ``dict`` for ``stats``, a list or a tuple of sizes), so an incidental choice never
costs a point. Probes run inside the worker, next to untrusted code: they hold no expected values
and decide nothing.

This file holds what every probe shares (the table ``PROBES``, ``call``, inputs and helpers);
each exercise's probes sit with its checks in ``grader/exercises/<module>.py``, and register here
with ``@probe`` when imported (``grader.exercises.load_probes``).

Every call into the submission goes through ``call``: right after it returns (or raises) the
worker puts back whatever the submission patched (``torch.equal``, ``Tensor.data_ptr``, this
module's helpers...), so the facts a probe computes next about it (an input left unchanged, a
buffer that did not move) are computed with the worker's own functions.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


PROBES: dict[str, Callable[..., Any]] = {}


def _restore_nothing() -> None:
    """``_restore`` until the worker binds its own."""


_restore: Callable[[], None] = _restore_nothing  # the worker binds its namespace restore here


def bind(restore: Callable[[], None]) -> None:
    global _restore
    _restore = restore


def call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for code of the submission's; whatever it patched is put back
    before the probe goes on."""
    try:
        return fn(*args, **kwargs)
    finally:
        _restore()


def probe(fn):
    PROBES[fn.__name__] = fn
    return fn


def rows(n: int, width: int, seed: int, device: str = "cpu") -> torch.Tensor:
    """``n`` rows of random values in [0.5, 1.5): fresh data, never zeros."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.rand(n, width, generator=g, device=device) + 0.5


def rowwise(x: torch.Tensor) -> torch.Tensor:
    """Each output row depends only on its input row."""
    return torch.tanh(x * 1.5 + 0.25).sum(dim=-1, keepdim=True) + x


def combine(*xs: torch.Tensor) -> torch.Tensor:
    """Depends on every element of every input, so a stale buffer shows."""
    return torch.tanh(xs[0]) * 0.5 + sum(x.sum() for x in xs)


def pair(x: torch.Tensor, y: torch.Tensor):
    return x * 2.0, {"y_plus_x_mean": y + x.mean()}


def listed(x: torch.Tensor, y: torch.Tensor):
    return [x * 2.0, y - x]


FUNCTIONS = {"rowwise": rowwise, "combine": combine, "pair": pair, "listed": listed}


def _pool_key(pool: Any) -> Any:
    """A pool handle as plain data (CUDA pools are tuples of ints; stand-in pools have an id)."""
    if isinstance(pool, tuple):
        return list(pool)
    return getattr(pool, "id", repr(pool))


def _as_list(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _attr(obj: Any, name: str) -> Any:
    """``obj.name``, or a marker saying it is missing: one missing attribute costs the checks
    that need it, not every check sharing the probe."""
    try:
        return call(getattr, obj, name)
    except Exception:  # noqa: BLE001 - a property that raises is as good as missing
        return f"<no attribute {name!r}>"


def _buffers(runner: Any) -> tuple:
    value = _attr(runner, "static_inputs")
    return tuple(value) if isinstance(value, (tuple, list)) else ()


def _plain_outputs(obj: Any) -> Any:
    """Outputs with their structure kept: tensors, tuples, lists and dicts of them."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu").clone()
    if isinstance(obj, tuple):
        return tuple(_plain_outputs(o) for o in obj)
    if isinstance(obj, list):
        return [_plain_outputs(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _plain_outputs(v) for k, v in obj.items()}
    return obj


def _sibling(mod, name: str):
    import importlib

    return importlib.import_module(f"{mod.__package__}.{name}")
