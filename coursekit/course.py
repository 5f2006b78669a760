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
    idea: str  # the lesson's idea its checks' points reward (README: points by idea)

    @property
    def marker(self) -> str:
        return f"ex{self.number}"

    def notes(self, language: str) -> str:
        """Its chapter of the course notes in ``language`` (``en`` or ``zh``)."""
        return f"notes/{language}/{self.number:02d}-{self.module}.md"

    @property
    def stub_heading(self) -> str:
        return f"Exercise {self.number} · {self.title}"


#: The idea of exercises 1 and 2 (the model, then the measurement).
LAUNCH_TAX = "the launch tax: its model and its measurement"
#: Checks that only reward refusing bad arguments, or saying that CUDA is needed, would carry this
#: idea (``Check(..., idea=ARGUMENTS)``). Those checks are given now (coursekit/argcheck.py,
#: called from the stubs; issue 33): they are worth at most ``ARGUMENTS_AT_MOST`` points, none, so
#: that every point follows one of the lesson's ideas.
ARGUMENTS = "argument checks and \"a CUDA device is needed\" errors"
ARGUMENTS_AT_MOST = 0
#: The lesson's table printed byte for byte (exercise 1's ``report``).
FORMAT = "the lesson's table, byte for byte"

EXERCISES = (
    Exercise(
        1,
        "launch_model",
        "the launch-overhead model",
        "`DecodeStep` (eager vs graph step time), the lesson's `report`, `simulate_eager_ms` "
        "(CPU–GPU pipeline), `fit_launch_model` (least squares)",
        "CPU",
        LAUNCH_TAX,
    ),
    Exercise(
        2,
        "launch_tax",
        "measuring the launch tax",
        "`time_ms` (CUDA events), `measure_launch_tax` (the lesson's Part A: 200 tiny kernels "
        "eager vs one graph), `sweep_launch_tax`",
        "CPU (timer), GPU",
        LAUNCH_TAX,
    ),
    Exercise(
        3,
        "capture",
        "capture with warm-up",
        "`capture`: warm-up and capture on one side stream per device, into a shared pool, clear errors for "
        "`.item()` and CPU copies",
        "CPU (streams simulated), GPU",
        "capturing a graph: warm-up on the capture stream, one memory pool, what a capture cannot hold",
    ),
    Exercise(
        4,
        "static_runner",
        "static buffers and copy-in",
        "`GraphRunner`: owned static buffers, checked `copy_` in, one capture, `clone_outputs`",
        "CPU (stand-in), GPU",
        "static buffers: fixed addresses, copy in, outputs overwritten",
    ),
    Exercise(
        5,
        "buckets",
        "batch-size buckets and padding",
        "`default_capture_sizes`, `padded_size`, `pad_rows`, `BucketedGraphRunner` (one graph "
        "per batch size, shared pool)",
        "CPU (stand-in), GPU",
        "batch-size buckets and padding",
    ),
    Exercise(
        6,
        "dispatch",
        "vLLM's CUDA-graph dispatch, V1 and V2 runners",
        "`CUDAGraphMode` helpers (vLLM's tuple modes); A, V1: `CudagraphDispatcher` keys (FULL decode up "
        "to `max_num_seqs`), `capture_descs`, `dispatch` with `valid_modes`/`invalid_modes`; B, V2: "
        "`CudaGraphManager` graphs, `candidates`, `dispatch` (first fit, else eager), "
        "`get_uniform_token_count`",
        "CPU",
        "modes and dispatch: FULL, PIECEWISE or eager for each batch",
    ),
    Exercise(
        7,
        "fusion",
        "kernel fusion",
        "`chain_hbm_bytes` (HBM traffic, fused vs not), `fused_add_rms_norm` (one kernel with "
        "`torch.compile` or Triton), `count_kernels` (`torch.profiler`)",
        "CPU, GPU (kernel counts)",
        "kernel fusion: fewer launches, less memory traffic",
    ),
    Exercise(
        8,
        "engine",
        "capstone: a decode engine with CUDA graphs",
        "`DecodeEngine` over the given Qwen2-shaped `coursekit.toymodel.ToyModel`: static "
        "buffers, padding into the padding slot, FULL / PIECEWISE / eager dispatch, "
        "`capture_model` (compile, then capture, with `compiler=`), greedy `generate`",
        "CPU (stand-in), GPU",
        "the engine: graphs, buckets and dispatch in one decode loop",
    ),
    Exercise(
        9,
        "tradeoffs",
        "which model is right, and what graphs cost",
        "`eager_timeline` (the pipeline kernel by kernel), `cpu_bound_launch_us` (where a step "
        "turns CPU-bound), `implied_launch_us` (the tau a measured step implies under each "
        "model), `kv_bytes_per_token`, `graph_memory_bytes` (shared pool or one each), "
        "`kv_tokens_forgone` (the `enforce_eager` trade-off)",
        "CPU",
        "when graphs pay and what they cost: the CPU-bound turn, the KV cache forgone",
    ),
)

MODULES = tuple(e.module for e in EXERCISES)
MARKERS = {e.module: e.marker for e in EXERCISES}  # module -> its pytest marker
MODULE_OF = {e.marker: e.module for e in EXERCISES}  # pytest marker -> its module


def by_module(module: str) -> Exercise:
    """The exercise whose module is ``module``; a KeyError naming it otherwise."""
    for e in EXERCISES:
        if e.module == module:
            return e
    raise KeyError(f"module: no exercise has module {module!r} (coursekit/course.py)")


def readme_table() -> str:
    """The README's table of exercises."""
    lines = ["| # | module | marker | you implement | runs on | notes |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {e.number} | [`{e.module}`](exercises/{e.module}.py) | `{e.marker}` | "
        f"{e.implement} | {e.runs_on} | [en]({e.notes('en')}) · [中文]({e.notes('zh')}) |"
        for e in EXERCISES
    ]
    return "\n".join(lines) + "\n"
