"""Attention over packed sequences by FlashAttention's variable-length kernel, for models whose transformers code
offers no packed-sequence kernel but flash-attn (Qwen2-VL and Qwen2.5-VL take sdpa, eager or flash attention, not
flex attention), where the ``flash-attn`` package is not installed.

Packed (``rl.step.packing``), a micro-batch is one row of ``M`` tokens. sdpa keeps each sequence to itself with a
dense block-diagonal mask of ``M x M`` (``masking_utils.find_packed_sequence_indices``): correct, but it computes
attention over every pair of the row's tokens, so a packed micro-batch of many sequences costs more attention than
its padded rows did. FlashAttention's variable-length kernel (verl's "remove padding" path) takes the sequences'
boundaries instead and computes each sequence's attention alone. PyTorch ships that kernel
(``torch.ops.aten._flash_attention_forward`` with cumulative sequence lengths, differentiable), so this module
registers an attention implementation with transformers (``AttentionInterface``) under :data:`VARLEN_ATTENTION`
that:

- on a packed row (batch 1, no attention mask, position ids, queries as long as keys) on CUDA in bfloat16 or
  float16, runs the variable-length kernel over the sequences the position ids mark (each restarts at 0);
- on a packed row elsewhere (CPU, float32), runs sdpa on each of those sequences in turn (with a sliding window
  or dropout: sdpa with the row's block-diagonal causal mask);
- on anything else (padded batches, generation with a cache) is transformers' sdpa, mask and all.

So a model switched to it (:func:`use_varlen_attention`, the text model only: its vision tower keeps its own
attention) computes what sdpa computes, and packed rows cost each sequence's own attention.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

VARLEN_ATTENTION = "aerorl_varlen"
"""The attention implementation's name, as transformers' configs hold it (``config._attn_implementation``)."""
FLASH_DTYPES = (torch.float16, torch.bfloat16)
TEXT_CONFIG = "text_config"


def sequence_bounds(positions: torch.Tensor) -> tuple[torch.Tensor, int]:
    """[M] position ids of a packed row (each sequence counting from 0) -> the sequences' cumulative lengths
    [S + 1] int32 and the longest sequence's length. A sequence starts where a position does not follow its
    predecessor by one, as transformers reads packed positions.

    >>> sequence_bounds(torch.tensor([0, 1, 2, 0, 1, 0]))
    (tensor([0, 3, 5, 6], dtype=torch.int32), 3)
    """
    starts = torch.ones_like(positions, dtype=torch.bool)  # [M]
    starts[1:] = positions[1:] - positions[:-1] != 1
    edges = torch.cat([starts.nonzero().flatten(), positions.new_tensor([positions.numel()])])  # [S + 1]
    return edges.to(torch.int32), int((edges[1:] - edges[:-1]).max())


def packed_causal_mask(positions: torch.Tensor, sliding_window: int | None = None) -> torch.Tensor:
    """[1, 1, M, M] bool: query ``i`` sees key ``j`` when both are in one sequence of the packed row and ``j``
    is not after ``i`` (nor ``sliding_window`` or more before it).

    >>> packed_causal_mask(torch.tensor([0, 1, 0]))[0, 0].int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    """
    starts = torch.ones_like(positions, dtype=torch.bool)  # [M]
    starts[1:] = positions[1:] - positions[:-1] != 1
    sequence = starts.cumsum(dim=0)  # [M] which sequence each token is in
    place = torch.arange(positions.numel(), device=positions.device)  # [M]
    allowed = (sequence[:, None] == sequence[None, :]) & (place[None, :] <= place[:, None])  # [M, M]
    if sliding_window is not None:
        allowed &= place[:, None] - place[None, :] < sliding_window
    return allowed[None, None]  # [1, 1, M, M]


def flash_dtype(query: torch.Tensor) -> torch.dtype | None:
    """The half dtype the variable-length kernel computes ``query`` in: its own, or under autocast the autocast
    dtype (rotary embeddings in float32 upcast a bfloat16 projection); None when it cannot (float32 outside
    autocast, CPU)."""
    if not query.is_cuda:
        return None
    if query.dtype in FLASH_DTYPES:
        return query.dtype
    if torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") in FLASH_DTYPES:
        return torch.get_autocast_dtype("cuda")
    return None


def flash_varlen(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, positions: torch.Tensor,
                 dtype: torch.dtype, scaling: float | None, sliding_window: int | None) -> torch.Tensor:
    """Causal attention of each packed sequence alone by the variable-length FlashAttention kernel:
    query [1, Hq, M, D], key and value [1, Hkv, M, D] (Hkv divides Hq) -> [1, M, Hq, D]."""
    bounds, longest = sequence_bounds(positions)
    q, k, v = (t[0].transpose(0, 1).to(dtype) for t in (query, key, value))  # [M, H, D] each
    window = {} if sliding_window is None else {"window_size_left": sliding_window - 1, "window_size_right": 0}
    out = torch.ops.aten._flash_attention_forward(q, k, v, bounds, bounds, longest, longest, 0.0, True, False,
                                                  scale=scaling, **window)[0]  # [M, Hq, D]
    return out[None]  # [1, M, Hq, D]


def varlen_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                             sliding_window: int | None = None, position_ids: torch.Tensor | None = None,
                             **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention interface (module docstring): query [B, Hq, T, D], key and value [B, Hkv, S, D]
    -> ([B, T, Hq, D], None)."""
    packed = (attention_mask is None and position_ids is not None and query.shape[0] == 1
              and query.shape[2] == key.shape[2])
    if not packed:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      sliding_window=sliding_window, **kwargs)
    positions = position_ids.reshape(-1)  # [M]
    dtype = flash_dtype(query)
    if dtype is not None and dropout == 0.0:
        return flash_varlen(query, key, value, positions, dtype, scaling, sliding_window), None
    if sliding_window is None and dropout == 0.0:
        return sequence_by_sequence(module, query, key, value, positions, scaling, **kwargs), None
    return sdpa_attention_forward(module, query, key, value, packed_causal_mask(positions, sliding_window),
                                  dropout=dropout, scaling=scaling, sliding_window=sliding_window, **kwargs)


def sequence_by_sequence(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         positions: torch.Tensor, scaling: float | None, **kwargs) -> torch.Tensor:
    """Causal sdpa of each packed sequence alone, in turn: query [1, Hq, M, D], key and value [1, Hkv, M, D]
    -> [1, M, Hq, D] (each sequence's own attention cost, no [M, M] mask)."""
    bounds, _ = sequence_bounds(positions)
    edges = bounds.tolist()
    parts = [sdpa_attention_forward(module, query[:, :, start:stop], key[:, :, start:stop], value[:, :, start:stop],
                                    None, scaling=scaling, is_causal=True, **kwargs)[0]  # [1, length, Hq, D]
             for start, stop in zip(edges[:-1], edges[1:], strict=True)]
    return torch.cat(parts, dim=1)  # [1, M, Hq, D]


def varlen_attention_mask(*args, attention_mask: torch.Tensor | None = None, **kwargs) -> torch.Tensor | None:
    """transformers' mask interface (its arguments passed on to sdpa's as they came): no mask for rows without
    padding or cache (the attention reads packed sequences from the position ids), else sdpa's."""
    if attention_mask is None and not args and without_cache(kwargs):
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


def without_cache(mask_arguments: dict) -> bool:
    """Whether the queries are the keys (no cached tokens before them), from transformers' mask arguments: its
    offsets and lengths, or (older transformers 5 releases) its ``cache_position``.

    >>> without_cache({"q_length": 5, "kv_length": 5, "q_offset": 0, "kv_offset": 0})
    True
    >>> without_cache({"cache_position": torch.arange(4, 5), "kv_length": 5})
    False
    """
    cache_position = mask_arguments.get("cache_position")
    kv_length = mask_arguments.get("kv_length")
    if cache_position is not None:
        return cache_position.numel() == kv_length and int(cache_position[0]) == 0
    return (mask_arguments.get("q_offset", 0) == 0 and mask_arguments.get("kv_offset", 0) == 0
            and mask_arguments.get("q_length") == kv_length)


def register_varlen_attention() -> None:
    """Register :data:`VARLEN_ATTENTION` with transformers (idempotent)."""
    AttentionInterface.register(VARLEN_ATTENTION, varlen_attention_forward)
    AttentionMaskInterface.register(VARLEN_ATTENTION, varlen_attention_mask)


def text_attention(model: torch.nn.Module) -> str | None:
    """The attention implementation of ``model``'s text model (a transformers VLM: its ``text_config``), or
    None when it has no text config."""
    text = getattr(model.config, TEXT_CONFIG, None)
    return None if text is None else text._attn_implementation


def set_text_attention(model: torch.nn.Module, implementation: str) -> bool:
    """Switch ``model``'s text model to attention ``implementation`` (transformers' ``set_attn_implementation``,
    for the text config only). Returns whether its text model now uses it (a model whose code cannot switch
    keeps its own)."""
    if text_attention(model) is None:
        return False
    if implementation == VARLEN_ATTENTION:
        register_varlen_attention()
    model.set_attn_implementation({TEXT_CONFIG: implementation})
    return text_attention(model) == implementation
