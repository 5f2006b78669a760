"""``coursekit.allocator``: which private call ends a failed capture's allocation, per torch
release (issue 19.3), decided from each release's own binary, on a CPU.

The golden data (``tests/platforms/torch_pool_bindings.json``) lists the ``torch._C`` names in
each release's ``libtorch_python.so``; re-record it with
``tests/platforms/record_torch_pool_bindings.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from coursekit import allocator

RECORDED = json.loads((Path(__file__).parent / "platforms" / "torch_pool_bindings.json").read_text())
RELEASES = RECORDED["releases"]


def test_every_supported_release_is_recorded():
    oldest = re.search(r'"torch>=(\d+\.\d+)', (Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert oldest, "pyproject.toml no longer says torch>=X.Y: update this test"
    minors = {allocator.torch_release(v) for v in RELEASES}
    low = allocator.torch_release(oldest[1])
    expected = {(2, m) for m in range(low[1], allocator.torch_release(torch.__version__)[1])}
    assert expected <= minors, f"releases without recorded bindings: {sorted(expected - minors)}"


@pytest.mark.parametrize("version", sorted(RELEASES, key=allocator.torch_release))
def test_the_chosen_call_exists_in_that_release(version):
    chosen = allocator.end_pool_call(version)
    bindings = RELEASES[version]["bindings"]
    assert chosen in bindings, (
        f"torch {version}: end_failed_capture would call torch._C.{chosen}, but that release's "
        f"libtorch_python.so defines only {bindings}"
    )


def test_the_chosen_call_is_declared_by_the_installed_torch():
    stub = Path(torch.__file__).parent / "_C" / "__init__.pyi"
    chosen = allocator.end_pool_call(torch.__version__)
    assert re.search(rf"def {chosen}\(\s*device", stub.read_text()), (
        f"torch {torch.__version__} does not declare torch._C.{chosen}(device, mempool_id)"
    )


@pytest.mark.parametrize(
    "version, release",
    [
        ("2.4.1+cu121", (2, 4)),
        ("2.6.0a0+git1234", (2, 6)),
        ("2.10.0", (2, 10)),
        ("2.5.0a0+e000cf0ad9.nv24.10", (2, 5)),
    ],
)
def test_torch_release_reads_local_and_prerelease_versions(version, release):
    assert allocator.torch_release(version) == release


def test_a_version_that_is_not_one_is_refused_by_name():
    with pytest.raises(ValueError, match="version"):
        allocator.torch_release("nightly")


class FakeBindings:
    """``torch._C`` as far as the helper uses it: records calls, optionally raising."""

    def __init__(self, name, error=None):
        self.calls = []
        self.error = error
        setattr(self, name, self._end)

    def _end(self, device, pool):
        self.calls.append((device, pool))
        if self.error:
            raise self.error


def test_ends_the_pool_it_is_given_on_the_given_device():
    fake = FakeBindings(allocator.end_pool_call(torch.__version__))
    assert allocator.end_failed_capture((0, 7), 0, bindings=fake) == "ended"
    assert fake.calls == [(0, (0, 7))]


def test_a_build_with_only_the_other_name_still_works():
    chosen = allocator.end_pool_call(torch.__version__)
    other = allocator.OLD_CALL if chosen == allocator.NEW_CALL else allocator.NEW_CALL
    fake = FakeBindings(other)
    assert allocator.end_failed_capture((0, 3), 0, bindings=fake) == "ended"
    assert fake.calls == [(0, (0, 3))]


def test_a_capture_torch_already_ended_is_not_an_error():
    fake = FakeBindings(
        allocator.end_pool_call(torch.__version__),
        RuntimeError("endAllocatePool: not currently recording to mempool_id"),
    )
    assert allocator.end_failed_capture((0, 7), 0, bindings=fake) == "already ended"


def test_other_allocator_errors_are_not_hidden():
    fake = FakeBindings(allocator.end_pool_call(torch.__version__), RuntimeError("CUDA error: boom"))
    with pytest.raises(RuntimeError, match="boom"):
        allocator.end_failed_capture((0, 7), 0, bindings=fake)


def test_a_missing_pool_is_refused_by_name():
    with pytest.raises(ValueError, match="pool"):
        allocator.end_failed_capture(None, 0, bindings=FakeBindings(allocator.NEW_CALL))


def test_without_cuda_nothing_can_need_ending():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the no-CUDA answer is checked on CPU machines")
    assert allocator.end_failed_capture((0, 7)) == "no CUDA"
