"""grader/runtime/wire.py: only exact built-in types cross from a worker to the judge, and nothing the
worker sends can make the judge run code, crash or hold much memory."""

import ast
import dataclasses
import json
import math

import pytest
import torch

from grader.runtime import wire
from grader.checks import differs
from grader.verdict import read_answers
from grader.sandbox import Run


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class SneakyFloat(float):
    pass


def roundtrip(value):
    return wire.decode(wire.loads(wire.dumps(wire.encode(value))))


def test_plain_values_round_trip_exactly():
    value = {"a": [1, 2.5, True, None, "x"], "b": (1, (2.0, "y")), "c": -0.0}
    assert roundtrip(value) == value
    back = roundtrip(value)
    assert type(back["b"]) is tuple and type(back["a"][0]) is int and type(back["a"][1]) is float


def test_numeric_subclasses_never_equal_anything():
    for rigged in (AlwaysEqual(430), SneakyFloat(5.9)):
        back = roundtrip(rigged)
        assert isinstance(back, wire.Opaque) and back != 430 and back != 5.9
        assert differs(back, 430, 1e-9, 0, 0, 0) is not None


def test_tensors_round_trip_with_dtype_shape_nan_and_bfloat16():
    for t in (
        torch.tensor([[1.5, math.nan], [math.inf, -2.0]]),
        torch.arange(6).reshape(2, 3),
        torch.tensor([0.1, 0.2], dtype=torch.bfloat16),
        torch.tensor([True, False]),
        torch.zeros(0, 3),
        torch.arange(12.0).reshape(3, 4).t(),
    ):
        back = roundtrip(t)
        assert back.dtype == t.dtype and back.shape == t.shape
        assert torch.equal(back.nan_to_num(7.0), t.nan_to_num(7.0))


def test_a_large_tensor_travels_as_bytes_not_as_numbers():
    t = torch.rand(512, 512)
    encoded = wire.dumps(wire.encode(t))
    assert len(encoded) < 1.5 * t.numel() * 4 and encoded.count(",") < 10
    assert torch.equal(roundtrip(t), t)


def test_tensor_subclasses_and_unknown_objects_are_opaque():
    class Sneaky(torch.Tensor):
        pass

    assert isinstance(roundtrip(torch.ones(2).as_subclass(Sneaky)), wire.Opaque)
    assert isinstance(roundtrip(object()), wire.Opaque)


@pytest.mark.parametrize(
    "spec",
    [
        {"dtype": "float32", "shape": [3], "b64": "AAAAAA=="},  # 4 bytes for 3 floats
        {"dtype": "float32", "shape": [-1], "b64": ""},
        {"dtype": "evil", "shape": [1], "b64": "AAAAAA=="},
        {"dtype": "float32", "shape": [1], "b64": "!!!!"},
        {"dtype": "float32", "shape": "x"},
        {"dtype": "float32", "shape": [10**12, 10**12], "b64": ""},
    ],
)
def test_malformed_tensors_are_opaque(spec):
    assert isinstance(wire.decode({wire.TENSOR: spec}), wire.Opaque)


def test_payloads_past_the_bounds_are_refused_before_parsing():
    with pytest.raises(ValueError, match="values"):
        wire.loads(b"[" + b"[]," * (wire.MAX_VALUES + 1) + b"0]")
    with pytest.raises(ValueError, match="larger"):
        wire.loads(b'"' + b"x" * (wire.MAX_FRAME_BYTES + 1) + b'"')
    with pytest.raises(ValueError, match="deep"):
        wire.loads(b"[" * 100_000 + b"]" * 100_000)


def test_frames_are_split_and_bad_headers_stop_the_reader():
    reader = wire.FrameReader(cap=100)
    data = wire.frame(b"abc") + wire.frame(b"") + wire.frame(b"hello")
    got = []
    for i in range(len(data)):  # byte by byte
        got += reader.feed(data[i : i + 1])
    assert got == [b"abc", b"", b"hello"] and reader.error is None
    for bad in (b"12x\nabc", b"9" * 30, wire.frame(b"y" * 101)):
        reader = wire.FrameReader(cap=100)
        reader.feed(bad)
        assert reader.error, bad[:20]


def run_with(*frames):
    return Run(answers=[json.dumps(f).encode() if not isinstance(f, bytes) else f for f in frames], returncode=0)


def test_malformed_results_are_reported_not_raised():
    bad = [
        b"not json",
        b"[1, 2]",
        b'{"probes": "x"}',
        b"[" * 50000 + b"]" * 50000,
        json.dumps(
            {"probes": [{"ok": True, "value": {"__tensor__": {"dtype": "float32", "shape": [2], "b64": "AA=="}}}]}
        ).encode(),
        b'{"probes": [{"ok": false, "error": {"types": "x", "message": "\\ud800\\u001b[2J"}}]}',
        b'{"probes": [1e400]}',
        b'{"probes": [' + b"9" * 5000 + b"]}",
    ]
    for data in bad:
        problem, answers = read_answers(run_with(data), 0, 1)
        assert problem or isinstance(answers[0].value, wire.Opaque) or not answers[0].ok, data[:40]
        if not problem and not answers[0].ok:
            assert "\x1b" not in answers[0].error["message"] and "\ud800" not in answers[0].error["message"]


def test_a_missing_phase_is_reported_with_the_run_failure():
    problem, _ = read_answers(Run(answers=[b'{"probes": []}'], returncode=None, timed_out=True, timeout_s=12), 1, 0)
    assert problem == "worker timed out (after 12 s)"


def _attributes_read(path, names):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names
    }


#: The judge's side of the requests: where they are planned, sent and orchestrated.
JUDGE_SIDE = ("judge.py", "plan.py", "workers.py")


def test_a_request_field_exists_once_and_on_both_sides():
    """``wire.Request`` is the request frame's only definition: the worker reads exactly its fields
    (no ``request.get(key, default)`` with a default of its own), the judge builds requests only
    through it (no dict literal with a request's keys, no keyword it lacks), and a frame with a
    field it does not know is refused. A field added on one side alone fails here."""
    import dataclasses

    from coursekit.impl import REPO_ROOT

    fields = {f.name for f in dataclasses.fields(wire.Request)}
    read = _attributes_read(REPO_ROOT / "grader" / "runtime" / "worker.py", {"request"}) - {"payload"}
    assert read == fields, (
        f"the worker reads {sorted(read - fields)} that Request lacks; "
        f"Request has {sorted(fields - read)} that the worker never reads"
    )
    for name in JUDGE_SIDE:
        tree = ast.parse((REPO_ROOT / "grader" / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                assert not keys & (fields - {"probe", "args"}) or len(keys & fields) < 2, (
                    f"{name} line {node.lineno}: a request built as a dict: {sorted(keys)}"
                )
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Request":
                unknown = {k.arg for k in node.keywords} - fields
                assert not unknown, f"{name} line {node.lineno}: Request({sorted(unknown)}=...)"
    with pytest.raises(ValueError, match="fields no Request has: \\['gpu_share'\\]"):
        wire.Request.from_wire({"module": "engine", "gpu_share": 0.5})
    with pytest.raises(ValueError, match="a request frame holds a dict, not list"):
        wire.Request.from_wire([])
    request = wire.Request(module="engine", probes=[{"probe": "p", "args": {}}])
    assert wire.Request.from_wire(wire.loads(request.payload())) == request


def test_an_answer_frame_is_built_and_read_in_one_place():
    """``wire.Answers`` is the answer frame's only definition: the worker writes no dict with an
    answer frame's keys of its own (it sends ``Answers(...).as_dict()``), the judge's side reads
    none of those keys from a decoded frame (only ``Answers.from_wire``), and what the worker
    sends is what the judge reads back."""
    from coursekit.impl import REPO_ROOT

    keys = {f.name for f in dataclasses.fields(wire.Answers)}
    worker = ast.parse((REPO_ROOT / "grader" / "runtime" / "worker.py").read_text(encoding="utf-8"))
    for node in ast.walk(worker):
        if isinstance(node, ast.Dict):
            found = {k.value for k in node.keys if isinstance(k, ast.Constant)} & keys
            assert not found, f"worker.py line {node.lineno}: an answer frame built as a dict ({sorted(found)})"
    for name in ("verdict.py", *JUDGE_SIDE):
        tree = ast.parse((REPO_ROOT / "grader" / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                assert node.slice.value not in keys, f"{name} line {node.lineno}: [{node.slice.value!r}] read by hand"
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
                assert node.left.value not in keys, f"{name} line {node.lineno}: {node.left.value!r} in a frame"
    for sent in (
        wire.Answers(probes=[{"ok": True, "value": 1}]),
        wire.Answers(import_error={"types": ["ImportError"], "message": "no"}),
        wire.Answers(fallback="timeout"),
    ):
        got = wire.Answers.from_wire(wire.loads(wire.dumps(sent.as_dict()).encode()))
        assert got.as_dict() == sent.as_dict() and got.fallback == sent.fallback, (got, sent)
    with pytest.raises(ValueError, match="not an object"):
        wire.Answers.from_wire([])
