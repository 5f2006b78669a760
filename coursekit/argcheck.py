"""The argument checks every exercise needs, given so that your time goes to the exercise's idea.

The stubs call these at the top of each function, before the part you write, as
``argcheck.count(...)`` after ``from coursekit import argcheck``; keep those lines. Each one
returns the value it checked (a list, for an iterable: read once, so a generator works) or raises
``ValueError`` whose message starts with the argument's name and says what was expected and what
came, e.g. ``count("n_layers", True, at_least=1)`` ->
``ValueError("n_layers: expected an int >= 1 (not a bool), got True")``.

Two kinds of value are refused everywhere, because Python lets them through silently:

* a **bool** where a number is meant (``True == 1`` and ``isinstance(True, int)`` both hold, so
  ``DecodeStep(n_layers=True)`` would quietly be a one-layer model);
* a **NaN or an infinity** where a time or a size is meant (``nan < 0`` is False, so a plain
  ``value < 0`` check waves NaN through and every figure computed from it is NaN).

``need_cuda`` is the one check that raises something else: ``RuntimeError``, because no argument
is wrong when the machine has no GPU.

The name ``argcheck`` is one no function of yours will take for a parameter or a local. The
module was ``coursekit/args.py`` before: a ``def f(*args)``, or an ``args = ...`` inside a
function, hid the module from that function's given lines, which then failed when it ran (a
function that runs only on a GPU showed it only there). ``coursekit/args.py`` remains, an alias of
this module, so a submission written against the old name still grades; write ``argcheck``.

The public tests marked ``given`` in ``exercises/tests/`` check that each exercise still makes
them. They carry no points: the grader grades what you write.
"""

from __future__ import annotations

import math
from typing import Iterable

import torch

__all__ = [
    "count",
    "counts",
    "decode_requests",
    "flag",
    "function",
    "index_rows",
    "instance",
    "same_length",
    "inputs_like",
    "need_cuda",
    "number",
    "numbers",
    "one_of",
    "tensor",
    "tensors",
]


def number(name: str, value: object, *, at_least: float = 0.0, above: float | None = None) -> float:
    """``value`` as a float: a finite int or float (not a bool, not NaN, not inf) that is ``>=
    at_least`` (0 unless told), or ``> above`` when ``above`` is given. Otherwise ``ValueError``
    naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: expected a number (an int or a float, not a bool), got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    if above is not None:
        if not value > above:
            raise ValueError(f"{name}: expected a value > {above:g}, got {value!r}")
    elif value < at_least:
        raise ValueError(f"{name}: expected a value >= {at_least:g}, got {value!r}")
    return float(value)


def numbers(name: str, values: Iterable[object], *, at_least: float = 0.0) -> list[float]:
    """Every item of ``values`` checked by ``number``, as a list of floats (``values`` is read
    once); item ``i`` is named ``name[i]``. ``values`` that is not iterable -> ``ValueError``
    naming ``name``."""
    items = _items(name, values)
    return [number(f"{name}[{i}]", v, at_least=at_least) for i, v in enumerate(items)]


def count(name: str, value: object, *, at_least: int = 0, at_most: int | None = None) -> int:
    """``value`` itself: an int (not a bool, not a float such as 2.0) with ``at_least <= value``
    (and ``value <= at_most`` when given). Otherwise ``ValueError`` naming ``name``."""
    return _whole(name, value, at_least, at_most, among=False)


def counts(
    name: str, values: Iterable[object], *, at_least: int = 0, at_most: int | None = None, nonempty: bool = False
) -> list[int]:
    """Every item of ``values`` checked by ``count``, as a list in the order read (``values`` is
    read once: a generator works); errors name ``name`` itself. ``nonempty=True``: no items ->
    ``ValueError`` naming ``name``."""
    checked = [_whole(name, v, at_least, at_most, among=True) for v in _items(name, values)]
    if nonempty and not checked:
        raise ValueError(f"{name}: expected at least one value, got none")
    return checked


def _whole(name: str, value: object, at_least: int, at_most: int | None, among: bool) -> int:
    """``count``'s rule, for one value or (``among``) for one of several."""
    kind, got = ("ints", f"got {value!r} among them") if among else ("an int", f"got {value!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        floor = "" if among else f" >= {at_least}"
        raise ValueError(
            f"{name}: expected {kind}{floor} (not {'bools' if among else 'a bool'}, "
            f"not {'floats' if among else 'a float'}), {got}"
        )
    if value < at_least or (at_most is not None and value > at_most):
        bounds = f">= {at_least}" if at_most is None else f"in {at_least}..{at_most}"
        raise ValueError(f"{name}: expected {kind} {bounds}, {got}")
    return value


def flag(name: str, value: object) -> bool:
    """``value`` itself when it is a bool (``True`` or ``False``; 1 and 0 are not). Otherwise
    ``ValueError`` naming ``name``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected a bool (True or False), got {value!r}")
    return value


def one_of(name: str, value: object, choices: tuple) -> object:
    """``value`` itself when it is one of ``choices``, of the same type (``"v1"`` for ``("v1",
    "v2")``; ``"V1"``, ``None`` or a bool are not). Otherwise ``ValueError`` naming ``name``
    (``"runner: expected one of 'v1', 'v2', got 'v3'"``)."""
    if not any(type(value) is type(c) and value == c for c in choices):
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def function(name: str, value: object) -> object:
    """``value`` itself when it can be called. Otherwise ``TypeError`` naming ``name`` (not a
    ``ValueError``: the call itself would fail with a TypeError)."""
    if not callable(value):
        raise TypeError(f"{name}: expected a callable, got {type(value).__name__}")
    return value


def instance(name: str, value: object, cls: type) -> object:
    """``value`` itself when it is a ``cls``. Otherwise ``ValueError`` naming ``name``."""
    if not isinstance(value, cls):
        raise ValueError(f"{name}: expected a {cls.__module__}.{cls.__qualname__}, got {type(value).__name__}")
    return value


def same_length(first: str, a: object, second: str, b: object) -> None:
    """Nothing when ``a`` and ``b`` have one length; otherwise ``ValueError`` naming both
    (``"n_kernels and step_ms: expected the same length, got 3 and 2"``)."""
    if len(a) != len(b):
        raise ValueError(f"{first} and {second}: expected the same length, got {len(a)} and {len(b)}")


def decode_requests(
    prompts: object, max_new_tokens: object, *, max_seqs: int, max_seq_len: int
) -> tuple[list[list[int]], list[int]]:
    """A batch of generation requests as ``(prompts, counts)``: the prompts as a list of lists
    (read once), and one count of new tokens per prompt (an int ``max_new_tokens`` is every
    prompt's). ``ValueError`` naming ``prompts`` for none or more than ``max_seqs`` prompts (one
    KV-cache slot each) or an empty prompt; naming ``max_new_tokens`` for a count that is not an
    int >= 1, counts whose number is not the number of prompts, or a sequence that would need a
    position past the cache: ``len(prompt) + count - 1 > max_seq_len`` (the last new token is
    never fed back, so exactly ``max_seq_len`` is fine)."""
    prompts = [list(p) for p in _items("prompts", prompts)]
    if not 1 <= len(prompts) <= max_seqs:
        raise ValueError(f"prompts: expected 1..{max_seqs} prompts (one KV-cache slot each), got {len(prompts)}")
    if not all(prompts):
        raise ValueError("prompts: every prompt needs at least one token, got an empty one")
    if isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool):
        max_new_tokens = [max_new_tokens] * len(prompts)
    counts_ = counts("max_new_tokens", max_new_tokens, at_least=1)
    if len(counts_) != len(prompts):
        raise ValueError(
            f"max_new_tokens: expected an int or one count per prompt ({len(prompts)}), got {len(counts_)} counts"
        )
    for i, (p, m) in enumerate(zip(prompts, counts_)):
        if len(p) + m - 1 > max_seq_len:
            raise ValueError(
                f"max_new_tokens: prompt {i} ({len(p)} tokens) plus {m} new tokens does not "
                f"fit max_seq_len = {max_seq_len}"
            )
    return prompts, counts_


def tensor(
    name: str,
    value: object,
    *,
    shape: tuple | None = None,
    row_shape: tuple | None = None,
    min_dim: int = 0,
    min_rows: int = 0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``value`` itself when it is a ``torch.Tensor`` with, for each one given, exactly ``shape``;
    rows of exactly ``row_shape`` (``value.shape[1:]``; the same shape, not merely as many
    elements); at least ``min_dim`` dimensions and ``min_rows`` rows; ``dtype``; and a place on
    ``device`` (``cuda`` and ``cuda:0`` are one device). Otherwise ``ValueError`` naming ``name``
    and what differs (a list or a number is not a tensor: a graph reads tensors' memory)."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if value.dim() < min_dim:
        raise ValueError(
            f"{name}: expected a tensor of at least {min_dim} dimension(s), got shape {tuple(value.shape)}"
        )
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(value.shape)}")
    if row_shape is not None and (value.dim() < 1 or tuple(value.shape[1:]) != tuple(row_shape)):
        raise ValueError(
            f"{name}: expected rows of shape {tuple(row_shape)}, got a tensor of shape {tuple(value.shape)}"
        )
    if min_rows and (value.dim() < 1 or len(value) < min_rows):
        raise ValueError(f"{name}: expected at least {min_rows} row(s), got shape {tuple(value.shape)}")
    if dtype is not None and value.dtype != dtype:
        raise ValueError(f"{name}: expected dtype {dtype}, got {value.dtype}")
    if device is not None and not same_device(value.device, device):
        raise ValueError(f"{name}: expected a tensor on {torch.device(device)}, got one on {value.device}")
    return value


def same_device(a: torch.device | str, b: torch.device | str) -> bool:
    """Whether ``a`` and ``b`` name one device: ``cuda`` without an index is the *current* CUDA
    device (``torch.cuda.current_device()``; a tensor made with ``device="cuda"`` reports it:
    ``cuda:1`` after ``torch.cuda.set_device(1)``), ``cpu`` is ``cpu:0``."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return a.type == "cpu" or (a.index or 0) == (b.index or 0)
    if a.index is None and b.index is None:
        return True
    return _cuda_index(a) == _cuda_index(b)


def _cuda_index(device: torch.device) -> int:
    """The index of a CUDA device, the current one where it names none (asked only then: on a
    machine without CUDA that is device 0)."""
    if device.index is not None:
        return device.index
    return torch.cuda.current_device() if torch.cuda.is_available() else 0


def inputs_like(name: str, values: tuple, like: tuple) -> tuple[torch.Tensor, ...]:
    """``values`` when it holds as many tensors as ``like``, each with its counterpart's shape,
    dtype and device: a different number -> ``TypeError`` naming ``name`` and how many are
    expected (``"inputs: expected 2 inputs, got 1"``); a mismatch -> ``ValueError`` naming
    ``name[i]``."""
    if len(values) != len(like):
        raise TypeError(f"{name}: expected {len(like)} inputs, got {len(values)}")
    return tuple(
        tensor(f"{name}[{i}]", v, shape=tuple(t.shape), dtype=t.dtype, device=t.device)
        for i, (v, t) in enumerate(zip(values, like))
    )


def index_rows(
    name: str, value: object, *, device: torch.device | str, rows: int | None = None, high: int | None = None
) -> int:
    """The length of ``value``, a 1-D int64 tensor of at least one row on ``device``: of exactly
    ``rows`` rows when given (``ValueError`` naming ``name``: the lengths must match), with every
    value in ``0..high`` when ``high`` is given and the tensor is on the CPU (on CUDA the values
    are not read: that would make the CPU wait for the GPU)."""
    x = tensor(name, value, min_dim=1, dtype=torch.long, device=device)
    if x.dim() != 1 or len(x) < 1:
        raise ValueError(f"{name}: expected a 1-D tensor with at least one row, got shape {tuple(x.shape)}")
    if rows is not None and len(x) != rows:
        raise ValueError(f"{name}: expected {rows} rows (one per token, as many as tokens), got {len(x)}")
    if high is not None and x.device.type == "cpu" and bool(((x < 0) | (x > high)).any()):
        raise ValueError(f"{name}: expected values in 0..{high}, got {x.tolist()[:16]}")
    return len(x)


def tensors(name: str, values: Iterable[object], *, cuda: bool = False) -> tuple[torch.Tensor, ...]:
    """Every item of ``values`` checked by ``tensor`` (item ``i`` named ``name[i]``), as a tuple;
    ``cuda=True``: each must also be on the current CUDA device (a CPU tensor has no place in a
    captured graph, and a capture records the current device's streams: a tensor on another GPU
    would be worked on outside the capture)."""
    checked = tuple(tensor(f"{name}[{i}]", v) for i, v in enumerate(_items(name, values)))
    if cuda:
        for i, t in enumerate(checked):
            if t.device.type != "cuda":
                raise ValueError(f"{name}[{i}]: expected a CUDA tensor, got one on {t.device}")
            if not same_device(t.device, "cuda"):
                current = _cuda_index(torch.device("cuda"))
                raise ValueError(
                    f"{name}[{i}]: expected a tensor on the current CUDA device (cuda:{current}), "
                    f"got one on {t.device}: a capture records the current device's streams; make its device "
                    f"current first (torch.cuda.set_device({t.device.index}), as each vLLM worker does for its GPU)"
                )
    return checked


def need_cuda(what: str) -> None:
    """``RuntimeError`` saying that ``what`` needs a CUDA device, when torch sees none (not a
    ``ValueError``: no argument is wrong)."""
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what} needs a CUDA device, and torch sees none (torch.cuda.is_available() is False)")


def _items(name: str, values: Iterable[object]) -> list[object]:
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name}: expected an iterable of values, got a {type(values).__name__}")
    try:
        return list(values)
    except TypeError:
        raise ValueError(f"{name}: expected an iterable of values, got {type(values).__name__}") from None
