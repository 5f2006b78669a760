"""Labs: the lesson's experiments, run on your GPU with your own code, and its models drawn.

The lesson's Part A, eager against one CUDA graph over chain lengths N (``launch_tax``):

    python -m coursekit.lab launch-tax                     # measure with exercises/ (needs CUDA)
    python -m coursekit.lab launch-tax --impl FOLDER       # measure with another folder of modules
    python -m coursekit.lab launch-tax --reference         # the bundled H200 figures, any machine
    python -m coursekit.lab launch-tax --from FILE         # re-plot a saved launch-tax.json

Four more labs draw models, on any machine (``--out`` folder, ``--impl`` as above):

    python -m coursekit.lab speedup [--reference]   # speedup.json/.svg: which model is right
    python -m coursekit.lab timeline                # timeline.json/.svg: needs exercise 9
    python -m coursekit.lab prefill                 # prefill.json/.svg: decode vs prefill
    python -m coursekit.lab fusion [--reference]    # fusion.json/.svg: fused vs unfused

Part B runs vLLM 0.26.0 itself on a GPU and reads its logs back on any machine (``vllm``):

    python -m coursekit.lab vllm run --preset lesson --out vllm-lab --dry-run   # commands, budget
    python -m coursekit.lab vllm analyze vllm-lab                               # saved logs

Each lab is a module of this package, and its docstring says what the lab draws and how:
``launch_tax``, ``speedup``, ``timeline``, ``prefill``, ``fusion`` and ``vllm`` (Part B, over
``vllm_runs``, ``vllm_analysis`` and ``vllm_report``); ``common`` holds what they share. The
first five's functions can be imported from the package itself (``from coursekit.lab import
fit_record``), as from the one file the labs once were.

Exit status: 0 done (launch-tax: without the fits when exercise 1 is unfinished); 1 an exercise
the lab needs is unfinished (it says which), or a module does not import; 2 bad arguments or no
CUDA device for measuring (Part B's: see ``coursekit.lab.vllm``). Everything except measuring is
pure Python over plain dicts (the JSON files' shapes), so the reports and the charts are tested
on the CPU.
"""

from __future__ import annotations

import argparse
import sys

from coursekit.impl import NAMED, REPO_ROOT, Implementation
from coursekit.lab import fusion, launch_tax, prefill, speedup, timeline, vllm

# The five labs' names, importable from the package as from the one file they were (the notes'
# doctests import them so).
from coursekit.lab.common import (  # noqa: F401 - re-exported
    ADDITIVE_COLOUR,
    EAGER_COLOUR,
    GRAPH_COLOUR,
    GRAPH_STEP_COLOUR,
    LESSON_LAUNCH_US,
    LESSON_STEP_KERNELS,
    PIPELINE_COLOUR,
    SPEEDUP_COLOUR,
    ExerciseNotFinished,
    call_student,
    copy_bandwidth_bps,
    decode7b,
    number_in,
    positive_int,
    student,
    write_json,
    wrote,
)
from coursekit.lab.fusion import (  # noqa: F401 - re-exported
    FUSED_BF16_TOL,
    FUSED_CHAINS,
    FUSION_DTYPE_BYTES,
    FUSION_HIDDEN,
    FUSION_ROWS,
    UNFUSED_OPS,
    UNFUSED_PASSES,
    fused_mismatch,
    fusion_panels,
    fusion_ratio,
    fusion_record,
    fusion_report,
    measure_fusion,
    write_fusion,
)
from coursekit.lab.launch_tax import (  # noqa: F401 - re-exported
    DEFAULT_SIZES,
    PART_A_NUMEL,
    PART_A_OPS,
    UNFITTED,
    against_the_real_step,
    chart_panels,
    fit_record,
    is_fitted,
    load_record,
    make_record,
    measure,
    part_a_vs_sweep,
    reference_record,
    report,
    write_outputs,
)
from coursekit.lab.prefill import (  # noqa: F401 - re-exported
    PREFILL_NUMELS,
    PREFILL_OPS,
    chain_kernel_us,
    prefill_panels,
    prefill_record,
    prefill_report,
    write_prefill,
)
from coursekit.lab.speedup import (  # noqa: F401 - re-exported
    LESSON_BANDWIDTH_BPS,
    SPEEDUP_CLIP,
    SPEEDUP_RANGE_MS,
    SPEEDUP_TABLE_MS,
    lesson_compute_ms,
    lesson_step,
    pipeline_disagreements,
    pipeline_eager_ms_equal,
    speedup_panels,
    speedup_record,
    speedup_report,
    step_disagreements,
    student_step,
    write_speedup,
)
from coursekit.lab.timeline import (  # noqa: F401 - re-exported
    BF16,
    CPU_COLOUR,
    IDLE_COLOUR,
    KERNEL_COLOUR,
    LAYER_7B_BYTES,
    NODE_COLOUR,
    QWEN_CONTEXT,
    QWEN_HIDDEN,
    QWEN_KV,
    QWEN_MLP,
    QWEN_QKV,
    layer_7b,
    timeline_inputs,
    timeline_record,
    timeline_report,
    timeline_scenarios,
    write_timeline,
)


def _named() -> list[str]:
    """The named implementations this repository has (a student repository: only exercises)."""
    return [name for name in NAMED if (REPO_ROOT / name / "__init__.py").is_file()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.lab",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    labs = parser.add_subparsers(dest="lab", required=True, metavar="LAB")

    def impl_and_out(sub, outputs: str):
        sub.add_argument(
            "--impl",
            default="exercises",
            help=f"{' or '.join(_named())} (default: exercises), or a folder of module files",
        )
        sub.add_argument("--out", default="lab-output", help=f"folder for {outputs} (default: %(default)s)")

    tax = labs.add_parser("launch-tax", help="Part A: eager vs CUDA graph over chain lengths N")
    impl_and_out(tax, "launch-tax.json and launch-tax.svg")
    tax.add_argument(
        "--sizes",
        type=positive_int,
        nargs="+",
        default=list(DEFAULT_SIZES),
        metavar="N",
        help="chain lengths to sweep (default: %(default)s)",
    )
    tax.add_argument(
        "--iters", type=positive_int, default=100, help="timed iterations per measurement (default: %(default)s)"
    )
    source = tax.add_mutually_exclusive_group()
    source.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="read a saved launch-tax.json (or the H200 anchor) instead of measuring; no GPU needed",
    )
    source.add_argument(
        "--reference",
        action="store_true",
        help="use the bundled H200 figures (coursekit/data/) instead of measuring; no GPU needed",
    )

    speed = labs.add_parser(
        "speedup",
        help="which model is right: the graph's speedup against compute time, additive vs pipeline (exercise 1)",
    )
    impl_and_out(speed, "speedup.json and speedup.svg")
    speed.add_argument(
        "--reference",
        action="store_true",
        help="draw the pipeline from its equal-kernel closed form instead of your simulate_eager_ms",
    )

    line = labs.add_parser(
        "timeline", help="the eager pipeline kernel by kernel against a graph replay (exercise 9's eager_timeline)"
    )
    impl_and_out(line, "timeline.json and timeline.svg")
    line.add_argument(
        "--launch-us",
        type=number_in(0),
        default=LESSON_LAUNCH_US,
        help="τ, the CPU's time per launch in µs (default: %(default)s, the lesson's)",
    )

    pre = labs.add_parser(
        "prefill",
        help="decode vs prefill: the graph's gain against the "
        "size of each kernel (exercises 1 and 9; with CUDA, exercise 2 measures)",
    )
    impl_and_out(pre, "prefill.json and prefill.svg")
    pre.add_argument(
        "--iters", type=positive_int, default=50, help="timed iterations per measured size (default: %(default)s)"
    )
    pre.add_argument(
        "--model-only", action="store_true", help="draw the model without measuring, even where there is CUDA"
    )

    fuse = labs.add_parser(
        "fusion", help="fused vs unfused add + RMS norm as tensors grow (exercise 7; measured with CUDA, else modelled)"
    )
    impl_and_out(fuse, "fusion.json and fusion.svg")
    fuse.add_argument(
        "--rows",
        type=positive_int,
        nargs="+",
        default=list(FUSION_ROWS),
        metavar="R",
        help="row counts (tokens) to draw (default: %(default)s)",
    )
    fuse.add_argument(
        "--hidden", type=positive_int, default=FUSION_HIDDEN, help="values per row (default: %(default)s, Qwen2.5-7B's)"
    )
    fuse.add_argument(
        "--iters", type=positive_int, default=50, help="timed calls per point when measuring (default: %(default)s)"
    )
    fuse.add_argument(
        "--reference", action="store_true", help="the traffic model by plain arithmetic, no measuring, no exercise 7"
    )
    vllm.add_parser(labs)
    return parser


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error (or --help)
        return exc.code
    if args.lab == "vllm":  # Part B reads --impl only to analyze: a dry run needs no exercises
        return vllm.command(args)
    try:
        impl = Implementation(args.impl)
    except ValueError as exc:
        print(f"lab: --{exc}", file=sys.stderr)
        return 2
    run = {
        "launch-tax": launch_tax.command,
        "speedup": speedup.command,
        "timeline": timeline.command,
        "prefill": prefill.command,
        "fusion": fusion.command,
    }[args.lab]
    try:
        return run(args, impl)
    except ExerciseNotFinished as exc:
        return _unfinished(exc, args.impl, reference=args.lab in ("speedup", "fusion"))
    except ImportError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1


def _unfinished(exc: ExerciseNotFinished, impl: str, reference: bool = False) -> int:
    other = [name for name in _named() if name != impl]
    print(
        f"lab: exercise {exc.number} is not finished: {exc}; finish it"
        + "".join(f", or run with --impl {name}" for name in other)
        + (", or with --reference" if reference else ""),
        file=sys.stderr,
    )
    return 1
