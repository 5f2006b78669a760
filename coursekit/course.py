"""The course's exercises, declared once.

Each exercise is one ``Exercise`` below: its number (its pytest marker is ``ex<number>``), its
module (``exercises/<module>.py`` the stub, ``exercises/tests/test_<module>.py`` its public tests),
its title (the stub's first line says ``Exercise <number> · <title>``), what the student
implements and where it runs (the README's table of exercises). Everything that lists exercises
is derived from this tuple: the pytest markers and fixtures, the grader's modules and rubric
tables, the README's table, the notebook.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    number: int
    module: str
    title: str
    implement: str  # what the student writes, for the README's table (Markdown)
    runs_on: str

    @property
    def marker(self) -> str:
        return f"ex{self.number}"

    @property
    def stub_heading(self) -> str:
        return f"Exercise {self.number} · {self.title}"


EXERCISES = (
    Exercise(1, "launch_model", "the launch-overhead model",
             "`DecodeStep` (eager vs graph step time), the lesson's `report`, `simulate_eager_ms` "
             "(CPU–GPU pipeline), `fit_launch_model` (least squares)", "CPU"),
    Exercise(2, "launch_tax", "measuring the launch tax",
             "`time_ms` (CUDA events), `measure_launch_tax` (the lesson's Part A: 200 tiny kernels "
             "eager vs one graph), `sweep_launch_tax`", "CPU (timer), GPU"),
    Exercise(3, "capture", "capture with warm-up",
             "`capture`: warm-up on a side stream, capture into a shared pool, clear errors for "
             "`.item()` and CPU copies", "GPU"),
    Exercise(4, "static_runner", "static buffers and copy-in",
             "`GraphRunner`: owned static buffers, checked `copy_` in, one capture, `clone_outputs`",
             "CPU (stand-in), GPU"),
    Exercise(5, "buckets", "batch-size buckets and padding",
             "`default_capture_sizes`, `padded_size`, `pad_rows`, `BucketedGraphRunner` (one graph "
             "per batch size, shared pool)", "CPU (stand-in), GPU"),
    Exercise(6, "dispatch", "a vLLM-style CUDA-graph dispatcher",
             "`CUDAGraphMode` helpers (vLLM's tuple modes), `CudagraphDispatcher` keys (FULL decode up to `max_num_seqs`), `capture_descs`, `dispatch` with `valid_modes`/`invalid_modes`",
             "CPU"),
    Exercise(7, "fusion", "kernel fusion",
             "`chain_hbm_bytes` (HBM traffic, fused vs not), `fused_add_rms_norm` (one kernel with "
             "`torch.compile` or Triton), `count_kernels` (`torch.profiler`)", "CPU, GPU (kernel counts)"),
    Exercise(8, "engine", "capstone: a decode engine with CUDA graphs",
             "`DecodeEngine` over the given Qwen2-shaped `coursekit.toymodel.ToyModel`: static "
             "buffers, padding into the padding slot, FULL / PIECEWISE / eager dispatch, "
             "`capture_model`, greedy `generate`", "CPU (stand-in), GPU"),
)

MODULES = tuple(e.module for e in EXERCISES)
MARKERS = {e.module: e.marker for e in EXERCISES}  # module -> its pytest marker


def by_module(module: str) -> Exercise:
    """The exercise whose module is ``module``; a KeyError naming it otherwise."""
    for e in EXERCISES:
        if e.module == module:
            return e
    raise KeyError(f"module: no exercise has module {module!r} (coursekit/course.py)")


def readme_table() -> str:
    """The README's table of exercises."""
    lines = ["| # | module | marker | you implement | runs on |", "|---|---|---|---|---|"]
    lines += [f"| {e.number} | [`{e.module}`](exercises/{e.module}.py) | `{e.marker}` | "
              f"{e.implement} | {e.runs_on} |" for e in EXERCISES]
    return "\n".join(lines) + "\n"
