"""The reference answers bad input the spec does not name with a clear error too (students read
it as the model answer), though the public tests do not demand it of them."""

import pytest
import torch

from solutions import buckets, capture, launch_model, launch_tax, static_runner


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: launch_model.simulate_eager_ms([1.0], -1.0), "launch_us"),
        (lambda: launch_model.simulate_eager_ms([1.0, -2.0], 1.0), r"kernel_us\[1\]"),
        (lambda: launch_model.DecodeStep(float("nan")), "weight_gib"),
        (lambda: buckets.pad_rows(torch.ones(4, 2), 3), "size"),
        (lambda: buckets.BucketedGraphRunner(torch.neg, torch.ones(8, 3), [8])(torch.ones(2, 5)), "x"),
        (lambda: buckets.BucketedGraphRunner(torch.neg, torch.ones(8, 3), [8])(torch.ones(0, 3)), "x"),
        (lambda: buckets.BucketedGraphRunner(torch.neg, torch.ones(8, 3), [])(torch.ones(1, 3)), "capture_sizes"),
        (lambda: launch_tax.time_ms(lambda: None, iters=2.5), "iters"),
        (lambda: launch_tax.time_ms(lambda: None, warmup=True), "warmup"),
        (lambda: launch_tax.sweep_launch_tax([]), "n_ops_list"),
        (lambda: launch_tax.measure_launch_tax(n_ops=0), "n_ops"),
        (lambda: capture.capture(torch.neg, torch.ones(2), warmup_iters=0), "warmup_iters"),
        (lambda: static_runner.GraphRunner(torch.add, torch.ones(2), [1.0, 2.0]), r"example_inputs\[1\]"),
        (
            lambda: static_runner.GraphRunner(torch.add, torch.ones(2), torch.ones(2))(torch.ones(2), 3.0),
            r"inputs\[1\]",
        ),
    ],
)
def test_reference_names_the_bad_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_reference_capture_and_runner_reject_what_is_not_callable():
    with pytest.raises(TypeError, match="fn"):
        capture.capture("not a function")
    with pytest.raises(TypeError, match="fn"):
        static_runner.GraphRunner(None, torch.ones(2))
