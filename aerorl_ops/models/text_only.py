"""Text-only rows (a question with no image and no video, e.g. a mixture's text part): which families refuse them.

Every family of ``models.tiny_families`` takes a prompt without an image beside prompts with images (its
row gets no vision token) and a batch of such prompts alone, except PaliGemma: its processor puts image
tokens before every prompt and refuses a call without images, so it takes a text-only row only when another
row of the same batch shows an image. Rather than depend on how rows fall into batches, a text-only row is
refused for it, in one line (``check_text_only``). ``tests/aerorl_ops/models/test_text_only_rows.py`` holds
this table to what each family's processor and model do.

>>> class PaliGemmaProcessor: ...
>>> check_text_only(PaliGemmaProcessor(), "tiny-paligemma", [1, 2])  # every row shows an image: nothing to say
>>> try:
...     check_text_only(PaliGemmaProcessor(), "tiny-paligemma", [1, 0])
... except TextOnlyRowError as error:
...     print(str(error)[:72])
model tiny-paligemma: a row shows no image (1 of 2 in this batch) and Pa
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TEXT_ONLY_REFUSALS: Mapping[str, str] = {
    "PaliGemmaProcessor": "PaliGemma shows image tokens before every prompt, so its processor takes no prompt "
                          "without an image",
}
"""Processor class name -> why its family cannot take a text-only row."""


class TextOnlyRowError(ValueError):
    """A row without image or video, shown to a model whose family cannot take one; one line."""


def check_text_only(processor: object, model: str, media_counts: Sequence[int]) -> None:
    """``TextOnlyRowError`` when a row shows no image and no video (its count in ``media_counts`` is 0) and
    ``processor``'s family cannot take such a row (``TEXT_ONLY_REFUSALS``); ``model`` names it."""
    reason = TEXT_ONLY_REFUSALS.get(type(processor).__name__)
    if reason is not None and 0 in media_counts:
        raise TextOnlyRowError(f"model {model}: a row shows no image ({media_counts.count(0)} of {len(media_counts)} "
                               f"in this batch) and {reason}; leave text-only rows (a mixture's text part) out of "
                               "its runs or use another family")
