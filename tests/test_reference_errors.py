"""The reference answers bad input the spec does not name with a clear error too (students read
it as the model answer), though the public tests do not demand it of them."""

import pytest
import torch

from solutions import buckets, launch_model


@pytest.mark.parametrize("call, name", [
    (lambda: launch_model.simulate_eager_ms([1.0], -1.0), "launch_us"),
    (lambda: launch_model.simulate_eager_ms([1.0, -2.0], 1.0), r"kernel_us\[1\]"),
    (lambda: launch_model.DecodeStep(float("nan")), "weight_gib"),
    (lambda: buckets.pad_rows(torch.ones(4, 2), 3), "size"),
    (lambda: buckets.BucketedGraphRunner(torch.neg, torch.ones(8, 3), [8])(torch.ones(2, 5)), "x"),
    (lambda: buckets.BucketedGraphRunner(torch.neg, torch.ones(8, 3), [8])(torch.ones(0, 3)), "x"),
    (lambda: buckets.BucketedGraphRunner(torch.neg, torch.ones(8, 3), [])(torch.ones(1, 3)),
     "capture_sizes"),
])
def test_reference_names_the_bad_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
