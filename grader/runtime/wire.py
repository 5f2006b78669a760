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

A frame is ``<decimal length>\\n<payload>`` (``frame``, ``FrameReader``: the only framer, used by
the judge, the worker and the shared worker's children alike). The judge writes request frames on
the worker's command pipe; the worker writes one answer frame per request frame on its result pipe.

A request frame is a ``Request``: its fields, and every default, exist here only. The judge builds
one, the worker reads one back with ``Request.from_wire`` (a field it does not know is an error,
not a silent default), so a field cannot be added on one side alone. An answer frame is an
``Answers``: the worker sends ``Answers(...).as_dict()``, the judge reads ``Answers.from_wire``
(leniently: whatever an untrusted worker sent, the judge says what was wrong with it and goes on).
"""

from __future__ import annotations

import base64
import json
import math
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

TENSOR, TUPLE, OBJECT = "__tensor__", "__tuple__", "__object__"
_MAX_DEPTH = 20
MAX_FRAME_BYTES = 8 << 20
MAX_VALUES = 200_000
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


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


@dataclass
class Request:
    """One request frame from the judge to a worker.

    A worker's first frame says what it is: a canary (``canary``: run no submission code, report
    the sandbox's facts; ``dynamo``: also import ``torch._dynamo``), a shared CPU worker
    (``shared``: several exercises, a forked child each) or one exercise's worker. Every frame
    but a canary's names a module of the submission (``package``.``module``, found in
    ``submission_dir``) and the probes to run on it (``probes``: ``{"probe": name, "args":
    encoded}`` each); a GPU worker caps its CUDA memory at ``gpu_fraction`` of the device. A
    shared worker's frames also carry their exercise (``group``), its phase (0: public, 1:
    hidden) and the seconds its child may take (``timeout_s``); its first frame the largest
    answer it relays (``cap``), the shared places it cleans between children (``shared_places``)
    and whether its uid is the worker's own (``isolated``)."""

    package: str = "submission"
    module: str = ""
    submission_dir: str = ""
    probes: list = field(default_factory=list)
    gpu_fraction: float = 0.9
    canary: bool = False
    dynamo: bool = False
    shared: bool = False
    group: str = ""
    phase: int = 0
    timeout_s: float = 60.0
    cap: int = MAX_FRAME_BYTES
    shared_places: list = field(default_factory=list)
    isolated: bool = False

    def payload(self) -> bytes:
        return dumps(asdict(self)).encode()

    @classmethod
    def from_wire(cls, data: Any) -> "Request":
        """The request a decoded frame holds; ``ValueError`` for anything but a dict of its fields."""
        if not isinstance(data, dict):
            raise ValueError(f"a request frame holds a dict, not {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"a request frame with fields no Request has: {unknown}")
        return cls(**data)


@dataclass
class Answers:
    """One answer frame, a worker's reply to a request frame (a canary's is its facts instead):
    one answer per probe of the request, in its order (``probes``: ``{"ok": True, "value":
    encoded}`` or ``{"ok": False, "error": {"types": [...], "message": ...}}``), none when
    importing the module raised (``import_error``: its types and message), or, from the shared
    worker, none and why it hands the exercise on to a worker of its own (``fallback``; "timeout"
    asks for twice the time there)."""

    probes: list = field(default_factory=list)
    import_error: Any = None
    fallback: str | None = None

    def as_dict(self) -> dict:
        """What the frame holds: a fallback alone, else the probes' answers and any import error."""
        if self.fallback is not None:
            return {"fallback": self.fallback}
        data: dict = {"probes": self.probes}
        if self.import_error is not None:
            data["import_error"] = self.import_error
        return data

    @classmethod
    def from_wire(cls, data: Any) -> "Answers":
        """The answers a decoded frame holds, as the judge reads an untrusted worker's: ``ValueError``
        for anything but a dict; what it lacks stays unset (``probes`` None: no answers at all)."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        fallback = str(data["fallback"]) if "fallback" in data else None
        return cls(data.get("probes"), data.get("import_error"), fallback)


def frame(payload: bytes) -> bytes:
    return b"%d\n" % len(payload) + payload


def write_frame(fd: int, payload: bytes, write: Callable[[int, Any], int] = os.write) -> None:
    """``payload`` as one frame on the pipe ``fd``, all of it (a pipe takes a large frame in parts).
    ``write``: ``os.write`` as it was when this module was imported (the worker passes its own)."""
    view = memoryview(frame(payload))
    while view:
        view = view[write(fd, view) :]


class FrameReader:
    """Splits a byte stream into frames; ``error`` says why it stopped trusting the stream (a
    header that is not a length, a frame over ``cap`` bytes)."""

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
            done.append(bytes(self.buffer[start : start + size]))
            del self.buffer[: start + size]
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
