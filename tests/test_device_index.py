"""Device names on a machine with several GPUs, tried on this CPU machine: ``cuda`` without an
index is the *current* device (``cuda:1`` after ``torch.cuda.set_device(1)``), never ``cuda:0``
by default. A box rented with two cards and ``--device cuda:1`` meets this first; the course's
device checks (``coursekit.argcheck``) must answer there as torch does. ``torch.cuda`` is faked
here only as far as the checks ask it: ``is_available`` and ``current_device``."""

from __future__ import annotations

import pytest
import torch

from coursekit import argcheck


@pytest.fixture
def current_gpu(monkeypatch):
    """A CUDA machine whose current device is the one the test sets (``current_gpu(1)``)."""
    asked = []

    def make_current(index: int) -> list:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

        def current_device() -> int:
            asked.append(index)
            return index

        monkeypatch.setattr(torch.cuda, "current_device", current_device)
        return asked

    return make_current


class OnGpu(torch.Tensor):
    """A CPU tensor that reports a place on a GPU (``device``, ``is_cuda``), as a tensor made there would."""

    index = 0

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", self.index)

    @property
    def is_cuda(self) -> bool:
        return True


def on_gpu(index: int) -> torch.Tensor:
    cls = type(f"OnGpu{index}", (OnGpu,), {"index": index})
    return torch.ones(4).as_subclass(cls)


def test_cuda_is_the_current_device_not_device_0(current_gpu):
    current_gpu(1)
    assert argcheck.same_device("cuda", "cuda:1") and argcheck.same_device("cuda:1", "cuda")
    assert not argcheck.same_device("cuda", "cuda:0"), "after set_device(1), 'cuda' is cuda:1, not cuda:0"
    assert not argcheck.same_device("cuda:0", "cuda:1")


def test_two_unindexed_names_are_one_device_without_asking(current_gpu):
    asked = current_gpu(3)
    assert argcheck.same_device("cuda", "cuda") and argcheck.same_device("cuda:2", "cuda:2")
    assert asked == [], "comparing cuda with cuda (or two indices) needs no CUDA call"


def test_without_cuda_the_names_compare_as_device_0():
    if torch.cuda.is_available():
        pytest.skip("checks the answer on a machine without CUDA")
    assert argcheck.same_device("cuda", "cuda:0") and not argcheck.same_device("cuda", "cuda:1")
    assert argcheck.same_device("cpu", "cpu:0") and not argcheck.same_device("cpu", "cuda")


def test_a_capture_input_on_another_gpu_is_refused_naming_it(current_gpu):
    """A capture records the current device's streams; an input on another GPU would be worked
    on outside the capture: a ValueError naming the input and the device to make current."""
    current_gpu(0)
    assert argcheck.tensors("static_inputs", [on_gpu(0)], cuda=True)
    with pytest.raises(
        ValueError, match=r"static_inputs\[1\]: expected a tensor on the current CUDA device \(cuda:0\)"
    ) as e:
        argcheck.tensors("static_inputs", [on_gpu(0), on_gpu(1)], cuda=True)
    assert "torch.cuda.set_device(1)" in str(e.value)
    current_gpu(1)
    assert argcheck.tensors("static_inputs", [on_gpu(1)], cuda=True)


def test_a_tensor_check_on_the_current_device(current_gpu):
    current_gpu(1)
    assert argcheck.tensor("x", on_gpu(1), device="cuda") is not None
    with pytest.raises(ValueError, match="x: expected a tensor on cuda"):
        argcheck.tensor("x", on_gpu(0), device="cuda")
