"""The rules between training settings: what one setting's value asks of another's, each a function that
returns the problem in one line (None: nothing), so the settings' check, the trainer and the tests share
one wording."""

from __future__ import annotations

from aerorl_ops.config.algorithms import GROUP_ALGORITHMS, algorithm_defaults
from aerorl_ops.models.entry import VLLM_BACKEND


def group_size_problem(algorithm: str, group_size: int) -> str | None:
    """What is wrong with ``group_size`` samples per prompt for ``algorithm`` (None: nothing)."""
    if group_size >= (2 if algorithm in GROUP_ALGORITHMS else 1):
        return None
    return (f"group_size must be >= 2 for {'/'.join(GROUP_ALGORITHMS)} (advantages are relative within a group), "
            f">= 1 otherwise, got {group_size!r}")


def overlong_problem(overlong_buffer: int | None, max_new_tokens: int) -> str | None:
    """The overlong buffer is the tail of the longest reply: it cannot be longer than the reply."""
    if overlong_buffer is None or overlong_buffer <= max_new_tokens:
        return None
    return f"overlong_buffer ({overlong_buffer}) must be at most max_new_tokens ({max_new_tokens})"


def reference_problem(reference: str, lora_rank: int) -> str | None:
    """A ``lora_base`` reference is the LoRA policy with its adapters disabled: it needs LoRA."""
    if reference != "lora_base" or lora_rank > 0:
        return None
    return ("reference must be 'quantized' when lora_rank = 0 ('lora_base' is the LoRA policy with its adapters "
            f"disabled: set lora_rank > 0), got {reference!r}")


def sleep_mode_problem(vllm_sleep_mode: bool, rollout_backend: str) -> str | None:
    """``vllm_sleep_mode`` puts the rollout engine to sleep: there is one only with ``rollout_backend = "vllm"``."""
    if not vllm_sleep_mode or rollout_backend == VLLM_BACKEND:
        return None
    return (f'vllm_sleep_mode = true puts the vLLM rollout engine to sleep during the update, but rollout_backend = '
            f'{rollout_backend!r} has none: set rollout_backend = "vllm", or vllm_sleep_mode = false')


def sleep_mode_device_problem(vllm_sleep_mode: bool, device_type: str) -> str | None:
    """vLLM's sleep mode frees the engine's memory through its CUDA memory pool (cumem): a GPU's only."""
    if not vllm_sleep_mode or device_type == "cuda":
        return None
    return (f"vllm_sleep_mode = true needs a CUDA device (vLLM's sleep mode frees the engine's memory through its "
            f"CUDA memory pool), but the policy is on {device_type}: set vllm_sleep_mode = false")


def rollout_mode_problem(rollout_mode: str, rollout_backend: str, ranks: int, rollout_is: bool,
                         algorithm: str, policy_loss: str | None) -> str | None:
    """What ``rollout_mode = "one_step_off"`` cannot do yet (None: nothing); a multi-turn environment is
    refused where the environment is known (``RLTrainer.rl_step``)."""
    if rollout_mode != "one_step_off":
        return None
    if rollout_backend == VLLM_BACKEND:
        return ('rollout_mode = "one_step_off" samples with a frozen copy of the policy, not a vLLM engine, yet: '
                'set rollout_backend = "hf", or rollout_mode = "sync"')
    if ranks > 1:
        return (f'rollout_mode = "one_step_off" needs nproc_per_node = 1, got {ranks} (one behaviour copy per rank is '
                'not supported yet): set rollout_mode = "sync"')
    loss = policy_loss or algorithm_defaults(algorithm).policy_loss
    if rollout_is and loss != "ppo":
        return (f'rollout_is weighs the per-token ppo policy loss only, got policy_loss {loss!r}: set '
                'policy_loss = "ppo", rollout_is = false, or rollout_mode = "sync"')
    return None


def sharding_problem(sharding: str, cpu_offload: bool, micro_batch_tokens: int, ranks: int) -> str | None:
    """What ``sharding = "fsdp2"`` (``rl.runtime.sharding``) cannot do yet, or ``cpu_offload`` without it
    (None: nothing)."""
    if cpu_offload and sharding != "fsdp2":
        return f'cpu_offload = true needs sharding = "fsdp2" (it offloads the shards), got sharding = {sharding!r}'
    if sharding == "fsdp2" and ranks > 1 and micro_batch_tokens:
        return (f'sharding = "fsdp2" cannot cut micro-batches by tokens yet (micro_batch_tokens = '
                f"{micro_batch_tokens}: the ranks would run different numbers of forward passes, each of which every "
                'rank must join): set micro_batch_tokens = 0, or sharding = "none"')
    return None


def nodes_problem(nnodes: int, rollout_mode: str) -> str | None:
    """What ``nnodes`` > 1 torchrun nodes cannot run yet, as several ranks on one node cannot (None: nothing)."""
    if nnodes == 1:
        return None
    if rollout_mode == "one_step_off":
        return (f'rollout_mode = "one_step_off" needs nnodes = 1, got {nnodes} (one behaviour copy per rank is not '
                'supported yet): set rollout_mode = "sync"')
    return None
