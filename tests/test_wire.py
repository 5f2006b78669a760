"""grader/wire.py: only exact built-in types cross from a worker to the judge, and nothing the
worker sends can make the judge run code or crash."""

import json
import math

import torch

from grader import wire
from grader.checks import differs
from grader.judge import _read_answers
from grader.sandbox import Run


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class SneakyFloat(float):
    pass


def roundtrip(value):
    return wire.decode(json.loads(wire.dumps(wire.encode(value))))


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
    for t in (torch.tensor([[1.5, math.nan], [math.inf, -2.0]]), torch.arange(6).reshape(2, 3),
              torch.tensor([0.1, 0.2], dtype=torch.bfloat16), torch.tensor([True, False])):
        back = roundtrip(t)
        assert back.dtype == t.dtype and back.shape == t.shape
        assert torch.equal(back.nan_to_num(7.0), t.nan_to_num(7.0))


def test_tensor_subclasses_and_unknown_objects_are_opaque():
    class Sneaky(torch.Tensor):
        pass

    assert isinstance(roundtrip(torch.ones(2).as_subclass(Sneaky)), wire.Opaque)
    assert isinstance(roundtrip(object()), wire.Opaque)


def test_malformed_results_are_reported_not_raised():
    bad = [b"not json", b"[1, 2]", b'{"probes": "x"}', b"[" * 50000 + b"]" * 50000,
           json.dumps({"probes": [{"ok": True, "value": {"__tensor__": {"dtype": "float32",
                                                                         "shape": [2], "data": [1]}}}]}).encode()]
    for data in bad:
        problem, answers = _read_answers(Run(result=data, returncode=0), 1)
        assert problem or isinstance(answers[0].value, wire.Opaque), data[:40]
