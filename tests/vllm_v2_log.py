"""Lines only vLLM 0.26.0's runner choice logs, for tests/test_vllm_lab.py (used by no other test).

``coursekit/data/vllm-0.26.0-formats.json`` records the V2 runner's "Model loading took %s GiB and
%.6f seconds" (``model_loading_v2``) and its capture line (``graph_capture_v2``), which the tests
build from the record. The messages below are not in that record; each is copied from vLLM
0.26.0's source with its file and line, the format's %-fields filled with sample values. A V2
run logs no "Estimated CUDA graph memory" line: its ``profile_cudagraph_memory`` returns 0
(``vllm/v1/worker/gpu/model_runner.py:705-707``), so no fixture has one.
"""

#: vllm/v1/worker/gpu_worker.py:377-378, in Worker.init_device:
#:     if self.use_v2_model_runner:
#:         logger.info_once("Using V2 Model Runner")
USING_V2 = "Using V2 Model Runner"

#: vllm/config/vllm.py:577-579, VllmConfig.use_v2_model_runner, no Triton:
#:     logger.warning_once(
#:         "Model Runner V2 requires Triton; using the V1 model runner instead."
#:     )
V2_NEEDS_TRITON = "Model Runner V2 requires Triton; using the V1 model runner instead."

#: vllm/config/vllm.py:584-588, VllmConfig.use_v2_model_runner, an unsupported feature on:
#:     logger.warning_once(
#:         "Model Runner V2 does not yet support %s; using the V1 model "
#:         "runner instead.",
#:         ", ".join(unsupported),
#:     )
#: (the feature named as _get_v2_model_runner_unsupported_features words it, config/vllm.py:2204)
V2_UNSUPPORTED = ("Model Runner V2 does not yet support %s; using the V1 model runner instead."
                  % "prompt embeds")

#: vllm/v1/worker/gpu_worker.py:575-586, logged by V1 only (it needs an estimate > 0):
#:     "CUDA graph memory profiling is enabled (default since "
#:     "v0.21.0). The current --gpu-memory-utilization=%.4f is "
#:     "equivalent to --gpu-memory-utilization=%.4f without "
#:     "CUDA graph memory profiling. To maintain the same "
#:     "effective KV cache size as before, increase "
#:     "--gpu-memory-utilization to %.4f. To disable, set "
#:     "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
V1_ESTIMATE_APPLIED = ("CUDA graph memory profiling is enabled (default since v0.21.0). The current "
                       "--gpu-memory-utilization=%.4f is equivalent to --gpu-memory-utilization="
                       "%.4f without CUDA graph memory profiling. To maintain the same effective "
                       "KV cache size as before, increase --gpu-memory-utilization to %.4f. To "
                       "disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
                       % (0.9, 0.8875, 0.9125))
