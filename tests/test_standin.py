"""The CPU stand-in behaves like a captured graph where the exercises depend on it."""

import pytest
import torch

from coursekit.standin import CapturedGraph, StandInPool, capture_on_cpu


def test_replay_reads_the_static_inputs_in_place():
    x = torch.arange(4.0)
    g = capture_on_cpu(lambda t: t * 2, x)
    x.copy_(torch.tensor([1.0, 1.0, 1.0, 1.0]))
    assert torch.equal(g.replay(), torch.full((4,), 2.0))
    x = torch.full((4,), 5.0)  # rebinding the name: the graph still reads the captured tensor
    assert torch.equal(g.replay(), torch.full((4,), 2.0))


def test_replay_overwrites_the_same_output_tensors():
    x = torch.zeros(3)
    g = capture_on_cpu(lambda t: (t + 1, {"twice": t * 2}), x)
    first = g.replay()
    held = first[0]
    x.fill_(10.0)
    second = g.replay()
    assert second is first and second[0] is held
    assert torch.equal(held, torch.full((3,), 11.0)), "a held output is overwritten by the next replay"
    assert torch.equal(second[1]["twice"], torch.full((3,), 20.0))
    assert g.graph.replays == 2


def test_warm_up_count_and_one_capture_call():
    calls = []
    g = capture_on_cpu(lambda t: calls.append(1) or t + 0, torch.ones(2), warmup_iters=4)
    assert len(calls) == 5, "warm-up runs fn warmup_iters times, then capture records one more call"
    g.replay()
    assert len(calls) == 6
    assert isinstance(g, CapturedGraph) and len(g.static_inputs) == 1


def test_pools():
    a = capture_on_cpu(torch.neg, torch.ones(1))
    b = capture_on_cpu(torch.neg, torch.ones(1))
    assert isinstance(a.graph.pool(), StandInPool) and a.graph.pool() != b.graph.pool()
    c = capture_on_cpu(torch.neg, torch.ones(1), pool=a.graph.pool())
    assert c.graph.pool() == a.graph.pool()


def test_in_place_function_returning_its_input():
    x = torch.ones(2)
    g = capture_on_cpu(lambda t: t.mul_(2), x, warmup_iters=1)
    assert g.static_outputs is x
    g.replay()
    assert torch.equal(x, torch.full((2,), 8.0))  # warm-up, capture, replay: three doublings


def test_shapes_are_fixed_at_capture():
    n = {"rows": 2}
    g = capture_on_cpu(lambda t: t[: n["rows"]] + 0, torch.ones(4))
    n["rows"] = 3
    with pytest.raises(RuntimeError, match="fixed at capture"):
        g.replay()


@pytest.mark.parametrize(
    "bad, error, name",
    [
        (dict(warmup_iters=0), ValueError, "warmup_iters"),
        (dict(warmup_iters=True), ValueError, "warmup_iters"),
    ],
)
def test_rejects_bad_warmup(bad, error, name):
    with pytest.raises(error, match=name):
        capture_on_cpu(torch.neg, torch.ones(1), **bad)


def test_rejects_bad_inputs():
    with pytest.raises(ValueError, match=r"static_inputs\[1\]"):
        capture_on_cpu(torch.add, torch.ones(1), 2.0)
    with pytest.raises(TypeError, match="fn"):
        capture_on_cpu("not callable", torch.ones(1))
