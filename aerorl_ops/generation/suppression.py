"""Token ids that sampling must never emit.

A sampled ``<|image_pad|>`` (or any vision placeholder) in a completion breaks the next forward
pass over prompt + completion ("Image features and image tokens do not match"), and chat-control
or padding tokens are never a valid answer. So generation suppresses every special or added token
except the EOS ids, and every id of the model's (padded) vocabulary that the tokenizer does not
have. ``generate(..., suppress_tokens=ids)`` sets their logits to -inf before sampling.
"""

from __future__ import annotations

from collections.abc import Iterable


def suppressed_token_ids(tokenizer, eos_ids: Iterable[int], vocab_size: int | None = None) -> list[int]:
    """Special / added token ids other than ``eos_ids``, plus ids in ``[len(tokenizer), vocab_size)``.

    >>> class Tok:
    ...     all_special_ids = [0, 2, 5]
    ...     added_tokens_decoder = {5: "<|image_pad|>", 6: "<|video_pad|>"}
    ...     def __len__(self):
    ...         return 8
    >>> suppressed_token_ids(Tok(), eos_ids=[2], vocab_size=10)
    [0, 5, 6, 8, 9]
    """
    ids = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    if vocab_size is not None:
        ids |= set(range(len(tokenizer), vocab_size))
    return sorted(ids - set(eos_ids))
