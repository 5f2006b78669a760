"""What crosses between the judge and a worker: plain JSON in length-prefixed frames, nothing else.

The worker turns whatever a submission returned into plain data with ``encode``; only exact
built-in types survive as themselves (a subclass of ``int`` or ``float`` with a rigged ``__eq__``
becomes ``{"__object__": "Evil"}``, which never equals a number). A tensor travels as its dtype,
shape and raw little-endian bytes in base64, so a large one costs the judge one buffer, not one
Python object per element. The judge reads it back with ``loads`` and ``decode``: ``json`` builds
only dicts, lists, strings, numbers, booleans and None, tensors are rebuilt from bytes, and
nothing the submission defined ever runs in the judge.

The judge's side is bounded whatever a worker sends: a frame is at most ``MAX_FRAME_BYTES`` and
holds at most ``MAX_VALUES`` JSON values (the largest real answer needs a fraction of both), so
millions of tiny objects never reach ``json.loads``; anything malformed raises ``ValueError``.

A frame is ``<decimal length>\\n<payload>``. The judge writes request frames on the worker's
command pipe; the worker writes one answer frame per request frame on its result pipe.
"""

from __future__ import annotations

import base64
import json
import math
import os
from typing import Any

TENSOR, TUPLE, OBJECT = "__tensor__", "__tuple__", "__object__"
_MAX_DEPTH = 20
MAX_FRAME_BYTES = 8 << 20
MAX_VALUES = 200_000
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
           "bool")


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
        return {TENSOR: _tensor_bytes(torch, value)}
    return {OBJECT: f"{kind.__module__}.{kind.__qualname__}"}


def _tensor_bytes(torch, value) -> dict:
    import ctypes

    t = value.detach().to("cpu").contiguous().clone()
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in _DTYPES:
        return {"dtype": dtype, "shape": list(t.shape), "b64": ""}
    raw = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""
    return {"dtype": dtype, "shape": list(t.shape), "b64": base64.b64encode(raw).decode("ascii")}


def decode(data: Any) -> Any:
    """The judge's view of encoded data: tuples and tensors rebuilt, unknown objects kept as
    ``Opaque`` markers that equal nothing."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict):
        if set(data) == {TUPLE} and isinstance(data[TUPLE], list):
            return tuple(decode(v) for v in data[TUPLE])
        if set(data) == {"__float__"}:
            try:
                return float(data["__float__"])
            except (TypeError, ValueError):
                return Opaque("malformed float")
        if set(data) == {OBJECT}:
            return Opaque(str(data[OBJECT]))
        if set(data) == {TENSOR}:
            return _tensor(data[TENSOR])
        return {k: decode(v) for k, v in data.items()}
    return data


class Opaque:
    """Something the worker could not send as plain data; it equals nothing."""

    def __init__(self, type_name: str):
        self.type_name = type_name[:200]

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def dumps(data: Any) -> str:
    return json.dumps(data, allow_nan=False, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """``json.loads`` with the judge's bounds: ``ValueError`` for a payload over
    ``MAX_FRAME_BYTES`` or with more than ``MAX_VALUES`` values (counted before parsing)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if len(raw) > MAX_FRAME_BYTES:
        raise ValueError(f"larger than {MAX_FRAME_BYTES} bytes")
    # Every JSON value but the first is preceded by ',' or ':' or opens a container.
    if raw.count(b",") + raw.count(b"[") + raw.count(b"{") > MAX_VALUES:
        raise ValueError(f"more than {MAX_VALUES} values")
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deep") from None


def frame(payload: bytes) -> bytes:
    return b"%d\n" % len(payload) + payload


def write_frame(fd: int, payload: bytes) -> None:
    """``payload`` as one frame on the pipe ``fd``, all of it (a pipe takes a large frame in parts)."""
    view = memoryview(frame(payload))
    while view:
        view = view[os.write(fd, view):]


class FrameReader:
    """Splits a byte stream into frames; ``error`` says why it stopped trusting the stream."""

    def __init__(self, cap: int = MAX_FRAME_BYTES):
        self.cap, self.buffer, self.frames, self.error = cap, bytearray(), [], None

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add bytes; return the frames they completed."""
        if self.error:
            return []
        self.buffer += chunk
        done = []
        while True:
            head, newline, _ = self.buffer[:24].partition(b"\n")
            if not newline:
                if len(self.buffer) >= 24:
                    self.error = "a malformed frame header"
                break
            if not head.isdigit():
                self.error = "a malformed frame header"
                break
            size = int(head)
            if size > self.cap:
                self.error = f"a frame larger than {self.cap} bytes"
                break
            start = len(head) + 1
            if len(self.buffer) < start + size:
                break
            done.append(bytes(self.buffer[start:start + size]))
            del self.buffer[:start + size]
        self.frames += done
        return done


def _tensor(spec: Any):
    import torch

    if not isinstance(spec, dict) or not isinstance(spec.get("shape"), list):
        return Opaque("malformed tensor")
    name = spec.get("dtype")
    if name not in _DTYPES:
        return Opaque(f"tensor of dtype {str(name)[:40]!r}")
    dtype = getattr(torch, name)
    try:
        shape = [int(s) for s in spec["shape"]]
        if any(s < 0 for s in shape) or len(shape) > 8:
            raise ValueError("bad shape")
        raw = base64.b64decode(spec.get("b64", ""), validate=True)
        count = math.prod(shape)
        if len(raw) != count * torch.empty((), dtype=dtype).element_size():
            raise ValueError("size does not match the shape")
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape).clone()
    except (TypeError, ValueError, RuntimeError, OverflowError, base64.binascii.Error):
        return Opaque("malformed tensor")


def _torch():
    import sys

    return sys.modules.get("torch")
