"""The toy model's two attention kernels (given code, coursekit/toymodel.py): why a prompt step
cannot run inside a full CUDA graph, as under FlashAttention 2 in vLLM 0.26.0."""

import pytest
import torch

from coursekit.standin import capture_on_cpu
from coursekit.toymodel import ToyModel

PROMPT = (torch.tensor([5, 6, 7, 8]), torch.tensor([0, 1, 2, 3]), torch.tensor([0, 0, 0, 0]))
DECODE = (torch.tensor([5, 6, 7]), torch.tensor([4, 0, 9]), torch.tensor([2, 0, 5]))


def logits(batch, max_query_len=None, model=None):
    return (model or ToyModel()).forward(*batch, max_query_len=max_query_len)


def test_both_kernels_agree_on_a_uniform_decode_batch():
    assert torch.allclose(logits(DECODE, 1), logits(DECODE), atol=1e-6)


def test_the_decode_kernel_is_wrong_for_a_prompt():
    """FlashAttention 2's ``max_query_len=1`` handling (vllm/v1/attention/backends/flash_attn.py:
    "these graphs will not work for mixed prefill-decode"): a prompt's later rows miss the keys its
    earlier rows write in the same step."""
    assert (logits(PROMPT, 1) - logits(PROMPT)).abs().max().item() > 1e-2


def test_the_varlen_kernel_cannot_be_captured_and_the_decode_kernel_can():
    model = ToyModel()
    with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
        capture_on_cpu(model.forward, *PROMPT, warmup_iters=1)
    graph = capture_on_cpu(lambda *batch: model.forward(*batch, max_query_len=1), *DECODE, warmup_iters=1)
    model.reset_cache()
    assert torch.allclose(graph.replay(), logits(DECODE), atol=1e-6)


def test_the_varlen_kernel_reads_only_what_the_batch_needs():
    """It sizes its work by the longest context, a host read: the same logits as attending over
    the whole cache, with the positions past it masked."""
    far = (torch.tensor([1, 2]), torch.tensor([60, 3]), torch.tensor([0, 1]))
    assert torch.allclose(logits(far), logits(far, 1), atol=1e-6)


def test_the_model_declares_what_vllm_declares_for_flash_attention_2():
    assert ToyModel.cudagraph_support == "uniform_batch"


@pytest.mark.gpu
def test_on_cuda_a_capture_refuses_the_varlen_kernel_and_holds_the_decode_kernel():
    """What the CPU stand-in imitates, on real CUDA graphs: the varlen kernel's host read
    (``int(positions.max())``) is refused by the capture ("operation not permitted when stream is
    capturing"), and the decode kernel captures and replays the eager logits."""
    from solutions.capture import capture  # the reference: it ends a failed capture cleanly

    model = ToyModel(device="cuda")
    prompt, decode = (tuple(t.cuda() for t in batch) for batch in (PROMPT, DECODE))
    with pytest.raises(RuntimeError):
        capture(model.forward, *prompt, warmup_iters=1)
    graph = capture(lambda *batch: model.forward(*batch, max_query_len=1), *decode, warmup_iters=1)
    model.reset_cache()
    replayed = graph.replay().clone()
    torch.cuda.synchronize()
    assert torch.allclose(replayed, ToyModel(device="cuda").forward(*decode), atol=1e-5)
