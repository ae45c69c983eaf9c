"""Under LoRA the policy's log-probs go through the fused LM-head path with the head frozen: no op,
forward or backward, makes a tensor with V columns and more rows than the counted tokens (the naive
[B, T, V] logits), and the head gets no gradient. On the embedded tiny Qwen2-VL."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.runtime.lora import attach_lora
from aerorl_ops.rl.step.rollout import supervised_batch
from aerorl_ops.rl.step.sequences import completion_tokens


class OutputShapes(TorchDispatchMode):
    """Shapes of every tensor an op returns (views of ``skip``'s storage left out)."""

    def __init__(self, skip: torch.Tensor) -> None:
        super().__init__()
        self.skip = skip.untyped_storage().data_ptr()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor) and leaf.untyped_storage().data_ptr() != self.skip:
                self.shapes.append(tuple(leaf.shape))
        return out

    def rows_with_columns(self, columns: int) -> int:
        """The most rows of any recorded tensor whose last dimension is ``columns``."""
        return max((int(torch.Size(s[:-1]).numel()) for s in self.shapes if s and s[-1] == columns), default=0)


def test_lora_log_probs_never_build_full_logits_and_leave_the_head_without_gradient(fresh_tiny_vlm):
    torch.set_num_threads(1)
    loaded = fresh_tiny_vlm
    model = attach_lora(loaded.model, TrainingSettings(lora_rank=2, seed=0), loaded.vision.parts)
    head = model.get_output_embeddings()
    vocab = head.weight.shape[0]
    env = make_env("easy_vqa", split="train", limit=4, seed=1)
    batch = supervised_batch(loaded, env, env.items[:2])
    counted = int(batch.completion_mask[:, 1:].sum())  # N tokens scored
    rows, seq = batch.input_ids.shape
    assert not head.weight.requires_grad and counted < rows * (seq - 1)
    assert vocab not in (loaded.model.config.text_config.hidden_size, seq, rows, counted)

    with OutputShapes(skip=head.weight) as recorded:
        tokens = completion_tokens(model, batch)  # forward with gradients, as in the RL update
        (-tokens.logprobs.sum() - tokens.entropy.sum()).backward()
    assert tokens.logprobs.shape == (counted,)
    assert 0 < recorded.rows_with_columns(vocab) <= counted  # the fused [N, V] blocks, never [B*T, V]
    assert head.weight.grad is None
    assert any(p.grad is not None for n, p in model.named_parameters() if "lora_" in n)

    with torch.no_grad(), OutputShapes(skip=head.weight) as naive:  # the check sees full logits when they exist
        model(**batch.inputs)
    assert naive.rows_with_columns(vocab) == rows * seq
