"""What crosses between the judge and a worker: plain JSON, nothing else.

The worker turns whatever a submission returned into plain data with ``encode``; only exact
built-in types survive as themselves (a subclass of ``int`` or ``float`` with a rigged ``__eq__``
becomes ``{"__object__": "Evil"}``, which never equals a number). Tensors travel as dtype, shape
and a flat list of values. The judge reads it back with ``decode``: ``json`` builds only dicts,
lists, strings, numbers, booleans and None, and tensors are rebuilt from those, so nothing the
submission defined ever runs in the judge.
"""

from __future__ import annotations

import json
import math
from typing import Any

TENSOR, TUPLE, OBJECT = "__tensor__", "__tuple__", "__object__"
_MAX_DEPTH = 20


def encode(value: Any, _depth: int = 0) -> Any:
    """Plain data for ``value``: exact types only (see the module docstring)."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if _depth > _MAX_DEPTH:
        return {OBJECT: "nested too deep"}
    if kind is list:
        return [encode(v, _depth + 1) for v in value]
    if kind is tuple:
        return {TUPLE: [encode(v, _depth + 1) for v in value]}
    if kind is dict and all(type(k) is str for k in value):
        return {k: encode(v, _depth + 1) for k, v in value.items()}
    torch = _torch()
    if torch is not None and kind is torch.Tensor:
        t = value.detach().to("cpu")
        flat = t.reshape(-1).tolist() if t.dtype != torch.bfloat16 else t.float().reshape(-1).tolist()
        return {TENSOR: {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                         "data": [encode(v) for v in flat]}}
    return {OBJECT: f"{kind.__module__}.{kind.__qualname__}"}


def decode(data: Any) -> Any:
    """The judge's view of encoded data: tuples and tensors rebuilt, unknown objects kept as
    ``Opaque`` markers that equal nothing."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict):
        if set(data) == {TUPLE}:
            return tuple(decode(v) for v in data[TUPLE])
        if set(data) == {"__float__"}:
            return float(data["__float__"])
        if set(data) == {OBJECT}:
            return Opaque(str(data[OBJECT]))
        if set(data) == {TENSOR}:
            return _tensor(data[TENSOR])
        return {k: decode(v) for k, v in data.items()}
    return data


class Opaque:
    """Something the worker could not send as plain data; it equals nothing."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def dumps(data: Any) -> str:
    return json.dumps(data, allow_nan=False, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    return json.loads(text)


def _tensor(spec: dict):
    import torch

    dtype = getattr(torch, str(spec["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        return Opaque(f"tensor of dtype {spec['dtype']!r}")
    values = [decode(v) for v in spec["data"]]
    if not all(type(v) in (bool, int, float) for v in values):
        return Opaque("tensor with non-numeric data")
    try:
        shape = [int(s) for s in spec["shape"]]
        build_dtype = torch.float32 if dtype == torch.bfloat16 else dtype
        return torch.tensor(values, dtype=build_dtype).reshape(shape).to(dtype)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        return Opaque("malformed tensor")


def _torch():
    import sys

    return sys.modules.get("torch")
