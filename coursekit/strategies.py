"""Hypothesis strategies and settings profiles for the whole course, kept in one place.

Profiles: ``dev`` (default; fast, random), ``ci`` (derandomized, more examples; chosen when the
environment variable CI is set), ``grading`` (derandomized and reproducible, no example database),
``sweep`` (dev's number of examples, derandomized: the repository's mutant sweeps), ``parity``
(the sweep without shrinking: which tests fail, for the staff's record of its mutants).
Pick one with ``--hypothesis-profile NAME`` or the HYPOTHESIS_PROFILE environment variable.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

# No explain phase: it multiplies the time a failing test takes (every stub fails) for little gain.
_common = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
settings.register_profile("dev", max_examples=40, **_common)
settings.register_profile("ci", max_examples=150, derandomize=True, database=None, **_common)
settings.register_profile("grading", max_examples=100, derandomize=True, database=None, print_blob=False, **_common)
# As many examples as a student's default run (dev), but the same ones every time: the course's
# own sweeps of wrong implementations must reject each one with no more.
settings.register_profile("sweep", max_examples=40, derandomize=True, database=None, **_common)
# The sweep's examples without shrinking: which tests a wrong implementation fails, not the
# smallest example (the staff's record of which check each failing test stands for).
settings.register_profile(
    "parity",
    max_examples=40,
    derandomize=True,
    database=None,
    **{**_common, "phases": [Phase.explicit, Phase.reuse, Phase.generate]},
)


def default_profile() -> str:
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


# ---------------------------------------------------------------- exercise 1: launch model

#: Microseconds as whole numbers, so sums and maxima are exact in floating point.
whole_us = st.integers(min_value=0, max_value=10_000).map(float)


@st.composite
def decode_step_kwargs(draw):
    """Keyword arguments for a valid ``DecodeStep`` (positive bandwidth, everything else >= 0)."""
    return dict(
        weight_gib=draw(st.floats(0, 200, allow_nan=False)),
        n_layers=draw(st.integers(0, 128)),
        kernels_per_layer=draw(st.integers(0, 64)),
        launch_us=draw(st.floats(0, 50, allow_nan=False)),
        bandwidth_bps=draw(st.floats(1e9, 1e13, allow_nan=False)),
        gpu_node_us=draw(st.floats(0, 5, allow_nan=False)),
    )


kernel_times = st.lists(whole_us, min_size=0, max_size=40)


@st.composite
def noiseless_line(draw):
    """``(n_kernels, step_ms, launch_us, compute_ms)`` with every point exactly on the line."""
    launch_us = draw(st.integers(0, 100).map(float)) + draw(st.sampled_from([0.0, 0.25, 0.5]))
    compute_ms = draw(st.floats(0, 100, allow_nan=False))
    counts = draw(st.lists(st.integers(1, 3000), min_size=2, max_size=12))
    if len(set(counts)) < 2:
        counts.append(counts[0] + draw(st.integers(1, 500)))
    step_ms = [compute_ms + n * launch_us / 1e3 for n in counts]
    return counts, step_ms, launch_us, compute_ms


# ---------------------------------------------------------------- exercises 5 and 6: buckets

sizes = st.integers(min_value=1, max_value=600)
size_lists = st.lists(sizes, min_size=1, max_size=20)
batch_sizes = st.integers(min_value=1, max_value=700)

MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
mode_names = st.sampled_from(MODES)


# ---------------------------------------------------------------- exercise 4: static runner

#: Shapes of a graph runner's inputs: one to three tensors of one to three dimensions.
tensor_shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)
input_shape_lists = st.lists(tensor_shapes, min_size=1, max_size=3)


# ---------------------------------------------------------------- exercise 7: fusion

#: (rows, hidden) of an add + RMSNorm input; the norm is over the last dimension.
norm_shapes = st.tuples(st.integers(1, 6), st.integers(1, 96))
counts = st.integers(min_value=0, max_value=10_000)
