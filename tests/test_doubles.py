"""Every test double takes the parameters of what it stands in for (``tests/doubles.py``).

``WarmWorker.run`` lacked ``sandbox.run``'s ``device`` for as long as no CPU run passed one; the
H200 found it. Here the doubles are compared with the originals on every machine."""

from __future__ import annotations

import importlib.util
import inspect

import pytest

from coursekit.impl import REPO_ROOT
from grader import nvidia_smi, sandbox
from tests import doubles


def test_every_marked_double_takes_the_originals_parameters():
    import tests.warm_worker  # noqa: F401 - its WarmWorker.run stands in for sandbox.run

    assert any(original is sandbox.run for _, original in doubles.DOUBLES)
    for double, original in doubles.DOUBLES:
        method = next(iter(inspect.signature(double).parameters), None) == "self"
        assert doubles.differs(double, original, method=method) is None


def test_a_double_that_lacks_a_parameter_is_refused_where_it_is_made(monkeypatch):
    def run_without_device(box, limits, requests, *, gpu=False, hide=(), slot=0):
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="missing device"):
        doubles.stands_in_for(sandbox.run)(run_without_device)
    with pytest.raises(TypeError, match="missing device"):
        monkeypatch.setattr(sandbox, "run", run_without_device)
    with pytest.raises(TypeError, match="missing smi"):
        monkeypatch.setattr(nvidia_smi, "gpu_memory", lambda: None)
    monkeypatch.setattr(nvidia_smi, "gpu_memory", lambda smi=None: None)  # the right parameters: fine


def test_the_fake_cuda_takes_torch_cudas_parameters():
    import torch

    spec = importlib.util.spec_from_file_location(
        "fake_cuda_under_test", REPO_ROOT / "tests" / "fake_cuda" / "sitecustomize.py"
    )
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)  # defines the stand-ins; puts none in place (no LAUNCH_TAX_FAKE_CUDA)
    assert torch.cuda.is_available is not fake.is_available
    for name, stand_in in fake.STAND_INS.items():
        real = getattr(torch.cuda, name)
        if inspect.isclass(real):
            assert doubles.differs(stand_in.__new__, real.__new__) is None
            for method in ("record", "wait", "synchronize", "query", "elapsed_time"):
                assert doubles.differs(getattr(stand_in, method), getattr(real, method)) is None, method
        else:
            assert doubles.differs(stand_in, real) is None, name
