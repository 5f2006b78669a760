"""Which grader check enforces each public test's rule (issue 23: public tests and grader agree).

``ENFORCED_BY["test_<module>.py::test_name"]`` names the check(s) (``exN.name``) that grade the
rule that public test checks, or says why no check can (a ``Reason``). tests/test_parity.py holds
it to the code (every public test is here, every check named exists, in the test's exercise, on
the same kind of machine) and to the kill matrix's record (tests/kill_matrix.json, written by
``python -m tests.kill_matrix --write``): a mutant that fails a public test must lose points on a
check named for it, and a mutant that loses a public check must fail a public test that names it.

Not listed: ``test_checks.py`` (it runs the grader's public checks themselves) and
``test_examples.py`` (the docstrings' ``>>>`` examples; each is a case of its function's rule).
"""

from __future__ import annotations


class Reason(str):
    """Why no grader check can enforce a public test's rule."""


ENFORCED_BY: dict[str, tuple[str, ...] | Reason] = {
    # ---------------------------------------------------------------- ex1 launch_model
    "test_launch_model.py::test_n_kernels_is_layers_times_kernels_plus_ten": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_compute_ms_is_gib_over_bandwidth": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_launch_ms_is_n_times_tau": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_eager_graph_and_speedup": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_lesson_numbers": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_negative_field_is_rejected": ("ex1.rejects_bad_arguments",),
    "test_launch_model.py::test_nan_field_is_rejected": ("ex1.rejects_bad_arguments",),
    "test_launch_model.py::test_zero_fields_are_accepted_and_kept": ("ex1.rejects_bad_arguments",),
    "test_launch_model.py::test_zero_bandwidth_is_rejected": ("ex1.rejects_bad_arguments",),
    "test_launch_model.py::test_report_prints_the_lesson_table_byte_for_byte": ("ex1.seed_report",),
    "test_launch_model.py::test_report_formats_every_row": ("ex1.seed_report", "ex1.report_other_rows"),
    "test_launch_model.py::test_seed_rows_are_the_lessons": ("ex1.seed_report",),
    # `python -m` runs the given run_exercise on report(SEED_ROWS): report's rule.
    "test_launch_model.py::test_running_the_module_prints_the_table": ("ex1.seed_report",),
    "test_launch_model.py::test_simulate_worked_example": ("ex1.simulate_eager_ms",),
    "test_launch_model.py::test_simulate_rejects_negative_times": ("ex1.rejects_bad_arguments",),
    "test_launch_model.py::test_simulate_no_kernels_is_zero": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_follows_the_pipeline": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_bounds": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_long_kernels_hide_launches": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_tiny_kernels_expose_launches": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_is_monotone": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_fit_recovers_a_noiseless_line": ("ex1.fit_launch_model", "ex1.fit_h200_sweep"),
    "test_launch_model.py::test_fit_is_least_squares": ("ex1.fit_launch_model", "ex1.fit_h200_sweep"),
    "test_launch_model.py::test_fit_on_the_h200_sweep": ("ex1.fit_launch_model", "ex1.fit_h200_sweep"),
    "test_launch_model.py::test_fit_rejects_bad_input": ("ex1.fit_launch_model",),
    # ---------------------------------------------------------------- ex2 launch_tax
    "test_launch_tax.py::test_time_ms_calls_fn_warmup_plus_iters_times": ("ex2.time_ms_call_count", "ex2.time_ms_without_warmup"),
    "test_launch_tax.py::test_time_ms_defaults": ("ex2.time_ms_call_count",),
    "test_launch_tax.py::test_time_ms_is_the_mean_of_the_timed_calls_in_ms": ("ex2.time_ms_mean_ms", "ex2.time_ms_exact_mean"),
    "test_launch_tax.py::test_time_ms_uses_a_monotonic_clock": ("ex2.time_ms_mean_ms",),
    "test_launch_tax.py::test_time_ms_is_exact_on_a_fake_clock": ("ex2.time_ms_exact_mean",),
    "test_launch_tax.py::test_time_ms_rejects_no_iterations": ("ex2.rejects_bad_arguments",),
    "test_launch_tax.py::test_time_ms_rejects_negative_warmup": ("ex2.rejects_bad_arguments",),
    "test_launch_tax.py::test_measure_launch_tax_without_cuda_says_so": ("ex2.rejects_bad_arguments",),
    "test_launch_tax.py::test_measure_launch_tax_checks_its_arguments_on_any_machine": ("ex2.rejects_bad_arguments",),
    "test_launch_tax.py::test_sweep_launch_tax_rejects_an_empty_sweep_on_any_machine": ("ex2.rejects_bad_arguments",),
    "test_launch_tax.py::test_time_ms_on_cuda_waits_for_the_gpu_work": ("ex2.gpu_time_ms_includes_gpu_work",),
    "test_launch_tax.py::test_measure_launch_tax_part_a": ("ex2.gpu_measure_launch_tax",),
    "test_launch_tax.py::test_sweep_launch_tax_measures_each_length_in_order": ("ex2.gpu_sweep_launch_tax",),
}
