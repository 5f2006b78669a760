"""Which grader check enforces each public test's rule (issue 23: public tests and grader agree).

``ENFORCED_BY["test_<module>.py::test_name"]`` names the check(s) (``exN.name``) that grade the
rule that public test checks, or says why no check can (a ``Reason``). tests/test_parity.py holds
it to the code (every public test is here, every check named exists, in the test's exercise, on
the same kind of machine) and to the kill matrix's record (tests/kill_matrix.json, written by
``python -m tests.kill_matrix --write``): a mutant that fails a public test must lose points on a
check named for it, and a mutant that loses a public check must fail a public test that names it.

Not listed: ``test_checks.py`` (it runs each public check itself: ``test_check[<module>.<name>]``
names its check, which tests/test_parity.py reads from the id) and ``test_examples.py`` (the
docstrings' ``>>>`` examples; each is a case of its function's rule).
"""

from __future__ import annotations


class Reason(str):
    """Why no grader check can enforce a public test's rule."""


#: A public test marked ``given``: it tests the argument checks the stub already makes with
#: ``coursekit.argcheck`` (given code, not the student's work), so no check grades it.
GIVEN = Reason(
    "given code: the argument checks of coursekit/argcheck.py that the stub already calls; "
    "tested (marker given), never graded"
)


ENFORCED_BY: dict[str, tuple[str, ...] | Reason] = {
    # ---------------------------------------------------------------- ex1 launch_model
    "test_launch_model.py::test_n_kernels_is_layers_times_kernels_plus_ten": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_n_kernels_is_an_int_for_whole_counts_given_as_floats": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_compute_ms_is_gib_over_bandwidth": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_launch_ms_is_n_times_tau": ("ex1.decode_step_formulas",),
    # report() prints these times: a wrong formula costs the report too.
    "test_launch_model.py::test_eager_graph_and_speedup": ("ex1.decode_step_formulas", "ex1.seed_report"),
    "test_launch_model.py::test_lesson_numbers": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_negative_field_is_rejected": GIVEN,
    "test_launch_model.py::test_nan_field_is_rejected": GIVEN,
    "test_launch_model.py::test_inf_and_bool_fields_are_rejected": GIVEN,
    "test_launch_model.py::test_simulate_rejects_non_finite_times": GIVEN,
    "test_launch_model.py::test_zero_fields_are_accepted_and_kept": ("ex1.decode_step_formulas",),
    "test_launch_model.py::test_zero_bandwidth_is_rejected": GIVEN,
    "test_launch_model.py::test_report_prints_the_lesson_table_byte_for_byte": ("ex1.seed_report",),
    "test_launch_model.py::test_report_formats_every_row": ("ex1.seed_report", "ex1.report_other_rows"),
    "test_launch_model.py::test_seed_rows_are_the_lessons": ("ex1.seed_report",),
    # `python -m` runs the given run_exercise on report(SEED_ROWS): report's rule.
    "test_launch_model.py::test_running_the_module_prints_the_table": ("ex1.seed_report",),
    "test_launch_model.py::test_simulate_worked_example": ("ex1.simulate_eager_ms",),
    "test_launch_model.py::test_simulate_rejects_negative_times": GIVEN,
    "test_launch_model.py::test_simulate_keeps_fractions_of_a_microsecond": ("ex1.simulate_eager_ms",),
    "test_launch_model.py::test_simulate_no_kernels_is_zero": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_follows_the_pipeline": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_bounds": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_simulate_long_kernels_hide_launches": (
        "ex1.simulate_eager_ms",
        "ex1.simulate_edge_cases",
    ),
    "test_launch_model.py::test_simulate_tiny_kernels_expose_launches": (
        "ex1.simulate_eager_ms",
        "ex1.simulate_edge_cases",
    ),
    "test_launch_model.py::test_simulate_is_monotone": ("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
    "test_launch_model.py::test_fit_recovers_a_noiseless_line": ("ex1.fit_launch_model", "ex1.fit_h200_sweep"),
    "test_launch_model.py::test_fit_is_least_squares": ("ex1.fit_launch_model", "ex1.fit_h200_sweep"),
    "test_launch_model.py::test_fit_on_the_h200_sweep": ("ex1.fit_launch_model", "ex1.fit_h200_sweep"),
    "test_launch_model.py::test_fit_rejects_sequences_of_different_lengths": GIVEN,
    "test_launch_model.py::test_fit_needs_two_distinct_kernel_counts": ("ex1.fit_launch_model",),
    "test_launch_model.py::test_fit_on_many_points": ("ex1.fit_launch_model",),
    # ---------------------------------------------------------------- ex2 launch_tax
    # The mean check counts the calls too (a mean over the wrong calls is no mean).
    "test_launch_tax.py::test_time_ms_calls_fn_warmup_plus_iters_times": (
        "ex2.time_ms_call_count",
        "ex2.time_ms_without_warmup",
        "ex2.time_ms_mean_ms",
    ),
    "test_launch_tax.py::test_time_ms_accepts_one_iteration_and_no_warmup": (
        "ex2.time_ms_call_count",
        "ex2.time_ms_without_warmup",
    ),
    "test_launch_tax.py::test_time_ms_defaults": ("ex2.time_ms_call_count",),
    "test_launch_tax.py::test_time_ms_is_the_mean_of_the_timed_calls_in_ms": (
        "ex2.time_ms_mean_ms",
        "ex2.time_ms_exact_mean",
    ),
    "test_launch_tax.py::test_time_ms_uses_a_monotonic_clock": ("ex2.time_ms_mean_ms",),
    "test_launch_tax.py::test_time_ms_is_exact_on_a_fake_clock": ("ex2.time_ms_exact_mean",),
    "test_launch_tax.py::test_time_ms_rejects_no_iterations": GIVEN,
    "test_launch_tax.py::test_time_ms_rejects_negative_warmup": GIVEN,
    "test_launch_tax.py::test_measure_launch_tax_without_cuda_says_so": GIVEN,
    "test_launch_tax.py::test_measure_launch_tax_checks_its_arguments_on_any_machine": GIVEN,
    "test_launch_tax.py::test_sweep_launch_tax_rejects_an_empty_sweep_on_any_machine": GIVEN,
    "test_launch_tax.py::test_sweep_launch_tax_rejects_a_bad_length_on_any_machine": GIVEN,
    "test_launch_tax.py::test_time_ms_on_cuda_waits_for_the_gpu_work": ("ex2.gpu_time_ms_includes_gpu_work",),
    "test_launch_tax.py::test_measure_launch_tax_part_a": ("ex2.gpu_measure_launch_tax",),
    "test_launch_tax.py::test_measure_launch_tax_warms_up_on_a_side_stream": ("ex2.gpu_measure_launch_tax",),
    # On a GPU: the sweep's order (the CPU check, with a stand-in) and a replay that matches.
    "test_launch_tax.py::test_sweep_launch_tax_measures_each_length_in_order": (
        "ex2.sweep_launch_tax",
        "ex2.gpu_measure_launch_tax",
    ),
    "test_launch_tax.py::test_sweep_measures_each_length_with_its_arguments": ("ex2.sweep_launch_tax",),
    # ---------------------------------------------------------------- ex3 capture
    "test_capture.py::test_capture_without_cuda_says_a_gpu_is_needed": GIVEN,
    "test_capture.py::test_warmup_iters_below_one_is_refused_on_any_machine": GIVEN,
    "test_capture.py::test_warm_up_and_capture_on_one_stream_with_streams_simulated": (
        "ex3.capture_on_the_warmup_stream",
    ),
    "test_capture.py::test_capture_records_on_the_stream_it_warmed_up_on": ("ex3.gpu_capture_on_the_warmup_stream",),
    "test_capture.py::test_replay_equals_eager_on_fresh_inputs": ("ex3.gpu_replay_equals_eager",),
    # The nearest check: replay_equals_eager compares static_outputs in fn's structure.
    "test_capture.py::test_static_outputs_keep_fns_structure": ("ex3.gpu_replay_equals_eager",),
    "test_capture.py::test_warmup_runs_exactly_n_times_on_a_side_stream": (
        "ex3.gpu_warmup_on_a_side_stream",
        "ex3.gpu_many_warmups",
    ),
    "test_capture.py::test_warmup_waits_for_work_queued_on_the_current_stream": (
        "ex3.gpu_warmup_waits_for_the_current_stream",
    ),
    "test_capture.py::test_capture_into_a_given_pool": ("ex3.gpu_capture_into_a_pool",),
    "test_capture.py::test_capture_rejects_bad_arguments": GIVEN,
    "test_capture.py::test_item_cannot_be_captured": ("ex3.gpu_failed_capture",),
    "test_capture.py::test_copy_from_cpu_cannot_be_captured": ("ex3.gpu_failed_capture_cpu_copy",),
    # ---------------------------------------------------------------- ex4 static_runner
    "test_static_runner.py::test_runner_returns_fn_of_the_latest_inputs": (
        "ex4.runner_returns_fn_of_latest_inputs",
        "ex4.runner_many_inputs",
    ),
    "test_static_runner.py::test_static_buffers_are_owned_stable_and_filled_by_copy": (
        "ex4.runner_owns_stable_buffers",
        "ex4.runner_returns_fn_of_latest_inputs",
        "ex4.runner_many_inputs",
    ),
    "test_static_runner.py::test_static_buffers_hold_the_example_values_at_capture": (
        "ex4.runner_owns_stable_buffers",
    ),
    "test_static_runner.py::test_a_function_that_fails_on_zeros_can_be_captured": (
        "ex4.runner_owns_stable_buffers",
        "ex4.runner_returns_fn_of_latest_inputs",
    ),
    "test_static_runner.py::test_captures_once_with_the_given_warmup": (
        "ex4.runner_captures_once",
        "ex4.runner_owns_stable_buffers",
    ),
    "test_static_runner.py::test_warmup_iters_defaults_to_3": ("ex4.runner_captures_once",),
    "test_static_runner.py::test_cloned_outputs_survive_the_next_call": ("ex4.runner_clone_outputs",),
    "test_static_runner.py::test_static_outputs_are_overwritten_when_not_cloned": (
        "ex4.runner_clone_outputs",
        "ex4.runner_structured_outputs_not_cloned",
    ),
    "test_static_runner.py::test_runner_uses_the_stand_in_for_cputensors_in": (
        "ex4.runner_captures_once",
        "ex4.runner_returns_fn_of_latest_inputs",
    ),
    "test_static_runner.py::test_example_inputs_must_be_tensors": GIVEN,
    "test_static_runner.py::test_call_checks_the_number_of_inputs": GIVEN,
    "test_static_runner.py::test_call_checks_each_input_against_its_buffer": GIVEN,
    "test_static_runner.py::test_call_checks_the_shape_not_the_element_count": GIVEN,
    "test_static_runner.py::test_gpu_runner_replays_fn_of_fresh_inputs": ("ex4.gpu_runner",),
    "test_static_runner.py::test_gpu_held_outputs_overwritten_only_without_clone": ("ex4.gpu_runner",),
    "test_static_runner.py::test_gpu_runner_rejects_a_cpu_tensor": GIVEN,
    # ---------------------------------------------------------------- ex5 buckets
    "test_buckets.py::test_default_capture_sizes_are_vllms": (
        "ex5.default_capture_sizes",
        "ex5.default_capture_sizes_large",
    ),
    "test_buckets.py::test_default_capture_sizes_defaults_to_512": ("ex5.default_capture_sizes",),
    "test_buckets.py::test_default_capture_sizes_rejects_small_max": GIVEN,
    "test_buckets.py::test_engine_capture_sizes_are_vllms": ("ex5.engine_capture_sizes",),
    "test_buckets.py::test_engine_capture_sizes_defaults": ("ex5.engine_capture_sizes",),
    "test_buckets.py::test_engine_capture_sizes_at_the_cap_and_above_256": ("ex5.engine_capture_sizes",),
    "test_buckets.py::test_runner_over_1d_rows": ("ex5.runner_returns_fn_of_real_rows",),
    "test_buckets.py::test_runner_over_1d_rows_refuses_a_0d_batch": GIVEN,
    "test_buckets.py::test_engine_capture_sizes_rejects": GIVEN,
    "test_buckets.py::test_padded_size_is_the_smallest_fitting_bucket": ("ex5.padded_size",),
    "test_buckets.py::test_padded_size_of_a_bucket_is_itself": ("ex5.padded_size",),
    "test_buckets.py::test_padded_size_accepts_one_row": ("ex5.padded_size",),
    "test_buckets.py::test_padded_size_rejects_bad_input": GIVEN,
    "test_buckets.py::test_padded_size_reads_a_generator_once": ("ex5.padded_size",),
    "test_buckets.py::test_pad_rows": ("ex5.pad_rows",),
    "test_buckets.py::test_pad_rows_pads_with_zero_by_default": ("ex5.pad_rows",),
    "test_buckets.py::test_pad_rows_never_truncates": GIVEN,
    "test_buckets.py::test_runner_returns_fn_of_the_real_rows": ("ex5.runner_returns_fn_of_real_rows",),
    "test_buckets.py::test_runner_captures_largest_first_into_one_pool": (
        "ex5.runner_captures_largest_first_in_one_pool",
    ),
    "test_buckets.py::test_runner_counts_replays_and_eager_calls": (
        "ex5.runner_stats",
        "ex5.runner_captures_largest_first_in_one_pool",
    ),
    "test_buckets.py::test_runner_runs_large_batches_eagerly": (
        "ex5.runner_returns_fn_of_real_rows",
        "ex5.runner_stats",
    ),
    "test_buckets.py::test_runner_returns_fresh_tensors": ("ex5.runner_returns_fn_of_real_rows",),
    "test_buckets.py::test_runner_never_writes_into_the_callers_tensors": (
        "ex5.runner_returns_fn_of_real_rows",
        "ex5.runner_captures_largest_first_in_one_pool",
    ),
    "test_buckets.py::test_runner_default_sizes_and_stand_in": (
        "ex5.runner_default_sizes_and_zero_padding",
        "ex5.runner_captures_largest_first_in_one_pool",
    ),
    "test_buckets.py::test_runner_defaults_warmup_3_and_pad_value_0": (
        "ex5.runner_returns_fn_of_real_rows",
        "ex5.runner_captures_largest_first_in_one_pool",
        "ex5.runner_default_sizes_and_zero_padding",
    ),
    "test_buckets.py::test_runner_keeps_the_row_shape_of_max_example": (
        "ex5.runner_returns_fn_of_real_rows",
        "ex5.runner_captures_largest_first_in_one_pool",
    ),
    "test_buckets.py::test_runner_checks_the_row_shape_not_its_element_count": GIVEN,
    "test_buckets.py::test_runner_rejects_a_batch_it_cannot_copy_in": GIVEN,
    "test_buckets.py::test_runner_accepts_every_batch_up_to_the_buffer": (
        "ex5.runner_returns_fn_of_real_rows",
        "ex5.runner_stats",
    ),
    "test_buckets.py::test_runner_rejects_sizes_outside_the_buffer": GIVEN,
    "test_buckets.py::test_gpu_runner_pads_with_nan_and_returns_only_real_rows": ("ex5.gpu_runner",),
    "test_buckets.py::test_gpu_buckets_captured_largest_first_into_one_pool": ("ex5.gpu_runner",),
    # ---------------------------------------------------------------- ex6 dispatch
    "test_dispatch.py::test_modes_are_vllms": ("ex6.mode_table",),
    "test_dispatch.py::test_keys_and_capture_order_are_vllms": (
        "ex6.capture_descs",
        "ex6.capture_descs_repeated_sizes",
    ),
    "test_dispatch.py::test_dispatch_is_vllms": ("ex6.dispatch", "ex6.dispatch_many_batches"),
    "test_dispatch.py::test_dispatch_examples": ("ex6.dispatch", "ex6.capture_descs"),
    "test_dispatch.py::test_dispatch_only_returns_keys": ("ex6.dispatch", "ex6.dispatch_many_batches"),
    "test_dispatch.py::test_dispatch_without_the_flag_is_a_mixed_batch": ("ex6.dispatch",),
    "test_dispatch.py::test_an_eager_batch_carries_exactly_its_token_count": ("ex6.dispatch",),
    "test_dispatch.py::test_uniform_decode_query_len_defaults_to_1": ("ex6.capture_descs",),
    "test_dispatch.py::test_capture_sizes_are_sorted_and_each_once": (
        "ex6.capture_descs",
        "ex6.capture_descs_repeated_sizes",
    ),
    "test_dispatch.py::test_empty_valid_modes_means_every_mode": ("ex6.dispatch",),
    "test_dispatch.py::test_keys_at_their_limits": ("ex6.capture_descs", "ex6.dispatch"),
    "test_dispatch.py::test_dispatch_rejects_a_bad_token_count": GIVEN,
    "test_dispatch.py::test_dispatch_refuses_when_no_mode_is_allowed": ("ex6.dispatch",),
    "test_dispatch.py::test_dispatcher_rejects": GIVEN,
    "test_dispatch.py::test_dispatcher_refuses_sizes_it_cannot_capture": ("ex6.capture_descs",),
    "test_dispatch.py::test_dispatcher_accepts_arguments_at_their_limits": ("ex6.capture_descs", "ex6.dispatch"),
    "test_dispatch.py::test_v2_capture_descs_are_vllms": ("ex6.v2_capture_descs",),
    "test_dispatch.py::test_v2_dispatch_is_vllms": ("ex6.v2_dispatch",),
    "test_dispatch.py::test_uniform_token_count_is_the_tokens_per_request": ("ex6.v2_dispatch",),
    "test_dispatch.py::test_v2_answers_a_candidate_or_eager": ("ex6.v2_capture_descs", "ex6.v2_dispatch"),
    "test_dispatch.py::test_v2_examples": ("ex6.v2_capture_descs", "ex6.v2_dispatch"),
    "test_dispatch.py::test_v2_decode_query_len_defaults_to_1": ("ex6.v2_capture_descs",),
    "test_dispatch.py::test_v2_manager_rejects": GIVEN,
    "test_dispatch.py::test_v2_dispatch_rejects": GIVEN,
    # ---------------------------------------------------------------- ex7 fusion
    "test_fusion.py::test_chain_hbm_bytes": ("ex7.chain_hbm_bytes",),
    "test_fusion.py::test_chain_hbm_bytes_without_ops_is_zero": ("ex7.chain_hbm_bytes",),
    "test_fusion.py::test_chain_hbm_bytes_rejects": GIVEN,
    "test_fusion.py::test_chain_hbm_bytes_at_its_limits": ("ex7.chain_hbm_bytes",),
    "test_fusion.py::test_fused_add_rms_norm_matches_the_reference": ("ex7.fused_norm_fp32", "ex7.fused_norm_bf16"),
    "test_fusion.py::test_fused_add_rms_norm_over_the_last_dimension_of_3d_inputs": (
        "ex7.fused_norm_fp32",
        "ex7.fused_norm_other_shapes",
    ),
    "test_fusion.py::test_fused_add_rms_norm_uses_the_eps_given": ("ex7.fused_norm_fp32",),
    "test_fusion.py::test_fused_add_rms_norm_eps_defaults_to_1e_6": ("ex7.fused_norm_fp32", "ex7.fused_norm_bf16"),
    "test_fusion.py::test_fused_add_rms_norm_accepts_a_1d_input": ("ex7.fused_norm_fp32", "ex7.fused_norm_bf16"),
    "test_fusion.py::test_fused_add_rms_norm_rejects_mismatched_inputs": GIVEN,
    "test_fusion.py::test_count_kernels_without_cuda_says_a_gpu_is_needed": GIVEN,
    "test_fusion.py::test_fused_add_rms_norm_on_cuda": ("ex7.gpu_fused_norm_is_one_kernel",),
    "test_fusion.py::test_count_kernels_counts_each_launch": ("ex7.gpu_count_kernels",),
    "test_fusion.py::test_reference_launches_several_kernels_the_fused_one": ("ex7.gpu_fused_norm_is_one_kernel",),
    # ---------------------------------------------------------------- ex8 engine
    "test_engine.py::test_every_mode_generates_the_tokens_of_eager_decoding": (
        "ex8.generate_every_mode",
        "ex8.generate_other_requests",
    ),
    "test_engine.py::test_step_logits_equal_eager_for_every_batch_size": ("ex8.step_logits",),
    "test_engine.py::test_an_int_max_new_tokens_is_every_sequences_count": (
        "ex8.generate_every_mode",
        "ex8.generate_other_requests",
    ),
    "test_engine.py::test_generate_shrinks_the_batch_as_sequences_finish": ("ex8.generate_shrinks_the_batch",),
    "test_engine.py::test_generate_steps_each_sequence_in_its_slot_and_passes_the_flag": (
        "ex8.generate_shrinks_the_batch",
    ),
    "test_engine.py::test_a_returned_result_survives_the_next_step": ("ex8.step_logits",),
    "test_engine.py::test_prompt_steps_are_mixed_batches_and_decode_steps_uniform": (
        "ex8.generate_shrinks_the_batch",
        "ex8.step_logits",
    ),
    "test_engine.py::test_a_batch_larger_than_every_bucket_runs_eagerly": ("ex8.step_logits",),
    "test_engine.py::test_padding_lanes_never_touch_a_real_sequence": (
        "ex8.padding_uses_the_padding_slot",
        "ex8.generate_every_mode",
    ),
    "test_engine.py::test_padding_rows_are_reset_before_every_replay": ("ex8.padding_uses_the_padding_slot",),
    "test_engine.py::test_padded_batches_replay_their_bucket_with_fixed_buffers": (
        "ex8.padding_uses_the_padding_slot",
        "ex8.step_logits",
        "ex8.piecewise_attention_is_eager",
    ),
    # Every probe of the engine runs it on "cpu:0" (its tensors say "cpu"): a step that compared
    # device names would lose these.
    "test_engine.py::test_a_device_is_a_device_however_it_is_named": ("ex8.step_logits", "ex8.generate_every_mode"),
    "test_engine.py::test_capture_largest_first_in_one_pool": ("ex8.capture_largest_first_in_one_pool",),
    "test_engine.py::test_piecewise_runs_attention_eagerly_and_full_captures_it": ("ex8.piecewise_attention_is_eager",),
    "test_engine.py::test_capture_model_records_time_and_memory": ("ex8.capture_largest_first_in_one_pool",),
    "test_engine.py::test_an_engine_built_with_the_defaults_captures_full_and_piecewise_graphs_warmed_up_once": (
        "ex8.capture_largest_first_in_one_pool",
    ),
    "test_engine.py::test_static_buffers_have_the_stated_dtypes_shapes_and_contents": (
        "ex8.padding_uses_the_padding_slot",
    ),
    "test_engine.py::test_graphs_hold_what_capture_returned_under_their_keys": (
        "ex8.capture_largest_first_in_one_pool",
    ),
    "test_engine.py::test_default_capture_sizes_are_vllms_plan": (
        "ex8.engine_default_sizes",
        "ex8.capture_largest_first_in_one_pool",
    ),
    "test_engine.py::test_step_before_capture_model_runs_eagerly": ("ex8.step_logits",),
    "test_engine.py::test_uniform_decode_is_worked_out_from_the_slots": (
        "ex8.step_logits",
        "ex8.generate_shrinks_the_batch",
    ),
    "test_engine.py::test_step_rejects_bad_rows": GIVEN,
    "test_engine.py::test_step_accepts_the_largest_token_slot_and_position": ("ex8.step_logits",),
    "test_engine.py::test_generate_rejects_bad_requests": GIVEN,
    "test_engine.py::test_generate_accepts_the_largest_request": ("ex8.generate_every_mode",),
    "test_engine.py::test_the_prompt_step_is_uniform_only_when_every_prompt_is_one_token": (
        "ex8.generate_shrinks_the_batch",
    ),
    "test_engine.py::test_a_step_of_300_rows_runs_eagerly": ("ex8.step_logits",),
    "test_engine.py::test_every_mode_on_cuda": ("ex8.gpu_engine",),
    "test_engine.py::test_capture_on_cuda_records_memory": ("ex8.gpu_engine",),
    # a prompt step's logits are generate's first step: wrong ones cost its tokens too
    "test_engine.py::test_full_graphs_alone_run_a_prompt_step_eagerly": (
        "ex8.piecewise_attention_is_eager",
        "ex8.generate_every_mode",
    ),
    "test_engine.py::test_with_a_compiler_every_captured_piece_is_compiled": ("ex8.compile_then_capture",),
    # inductor's kernels themselves are not the student's: what the student wires (compile, then
    # capture, never in step) is graded with a stand-in compiler; wrong tokens cost its generate too
    "test_engine.py::test_compiled_then_captured_is_token_identical_in_float32": ("ex8.compile_then_capture",),
    "test_engine.py::test_compiled_then_captured_on_cuda": Reason(
        "torch.compile's Triton kernels are not the student's code: the engine's part (each captured "
        "piece compiled first, never in step) is graded on a CPU by ex8.compile_then_capture"
    ),
    # ---------------------------------------------------------------- ex9 tradeoffs
    "test_tradeoffs.py::test_timeline_worked_example": ('ex9.eager_timeline',),
    "test_tradeoffs.py::test_kv_tokens_forgone_of_a_gib_by_runner": ("ex9.kv_tokens_by_runner",),
    "test_tradeoffs.py::test_kv_tokens_forgone_v1_takes_the_graphs_out_of_the_cache": ("ex9.kv_tokens_by_runner",),
    "test_tradeoffs.py::test_kv_tokens_forgone_v2_costs_no_tokens": ("ex9.kv_tokens_by_runner",),
    "test_tradeoffs.py::test_kv_tokens_forgone_rejects_a_runner_it_does_not_know": GIVEN,
    "test_tradeoffs.py::test_timeline_no_kernels_is_empty": ('ex9.eager_timeline',),
    "test_tradeoffs.py::test_timeline_keeps_fractions_of_a_microsecond": ('ex9.eager_timeline',),
    "test_tradeoffs.py::test_timeline_times_are_floats_for_int_inputs": ('ex9.eager_timeline',),
    "test_tradeoffs.py::test_timeline_follows_the_pipeline": ('ex9.eager_timeline', 'ex9.long_profiles'),
    "test_tradeoffs.py::test_timeline_rejects_a_bad_launch_time": GIVEN,
    "test_tradeoffs.py::test_timeline_rejects_a_bad_kernel_time": GIVEN,
    "test_tradeoffs.py::test_tau_star_worked_example": ('ex9.cpu_bound_launch_us',),
    "test_tradeoffs.py::test_tau_star_ignores_the_last_kernel": ('ex9.cpu_bound_launch_us', 'ex9.long_profiles'),
    "test_tradeoffs.py::test_tau_star_of_fewer_than_two_kernels_is_infinite": ('ex9.cpu_bound_launch_us',),
    "test_tradeoffs.py::test_tau_star_is_the_smallest_running_mean": ('ex9.cpu_bound_launch_us', 'ex9.long_profiles'),
    "test_tradeoffs.py::test_tau_star_is_where_the_step_turns_cpu_bound": (
        'ex9.cpu_bound_launch_us',
        'ex9.long_profiles',
    ),
    "test_tradeoffs.py::test_tau_star_rejects_a_bad_kernel_time": GIVEN,
    "test_tradeoffs.py::test_implied_tau_of_the_h200_7b_step": ('ex9.implied_launch_us',),
    "test_tradeoffs.py::test_implied_tau_follows_both_models": ('ex9.implied_launch_us',),
    "test_tradeoffs.py::test_implied_tau_refuses_a_step_shorter_than_its_compute": ('ex9.implied_launch_us',),
    "test_tradeoffs.py::test_implied_tau_rejects_bad_input": GIVEN,
    "test_tradeoffs.py::test_kv_bytes_of_qwen25_7b": ('ex9.kv_bytes_per_token',),
    "test_tradeoffs.py::test_kv_bytes_per_token": ('ex9.kv_bytes_per_token',),
    "test_tradeoffs.py::test_kv_bytes_rejects_bad_input": GIVEN,
    "test_tradeoffs.py::test_graph_memory_is_max_shared_and_sum_separate": ('ex9.graph_memory_bytes',),
    "test_tradeoffs.py::test_graph_memory_shares_one_pool_by_default": ('ex9.graph_memory_bytes',),
    "test_tradeoffs.py::test_graph_memory_rejects_a_bad_footprint": GIVEN,
    "test_tradeoffs.py::test_graph_memory_rejects_a_flag_that_is_no_bool": GIVEN,
    "test_tradeoffs.py::test_kv_tokens_forgone_examples": ('ex9.kv_tokens_forgone',),
    "test_tradeoffs.py::test_kv_tokens_forgone_is_whole_tokens": ('ex9.kv_tokens_forgone',),
    "test_tradeoffs.py::test_kv_tokens_forgone_rejects_bad_input": GIVEN,
    # `python -m` prints the figures through implied_launch_us, cpu_bound_launch_us, kv_bytes_per_token
    # and kv_tokens_forgone: a wrong one costs its own check.
    "test_tradeoffs.py::test_running_the_module_prints_the_figures": (
        "ex9.implied_launch_us",
        "ex9.cpu_bound_launch_us",
        "ex9.kv_bytes_per_token",
        "ex9.kv_tokens_forgone",
        "ex9.kv_tokens_by_runner",
    ),
}
