"""Text-only rows (a question with no image and no video, e.g. a mixture's text part): which families refuse them.

Every family of ``models.tiny_families`` takes a prompt without an image beside prompts with images (its
row gets no vision token) and a batch of such prompts alone, except two:

- PaliGemma: its processor puts image tokens before every prompt and refuses a call without images, so it
  takes a text-only row only when another row of the same batch shows an image;
- Llama 3.2 Vision through its torchvision image processor (transformers' default where torchvision
  imports): it gives aspect-ratio ids to the rows with images only, so the model fails on a batch that mixes
  a row without an image (its PIL image processor does not).

Rather than depend on how rows fall into batches, a text-only row is refused for them, in one line
(``check_text_only``); the table is keyed by the processor's class or its image processor's.
``tests/aerorl_ops/models/test_text_only_rows.py`` holds this table to what each family's processor and
model do.

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
    "MllamaImageProcessor": "Llama 3.2 Vision's torchvision image processor gives aspect-ratio ids to the rows "
                            "with images only, so its model fails on a batch mixing a row without an image",
}
"""Processor or image processor class name -> why its family cannot take a text-only row."""


class TextOnlyRowError(ValueError):
    """A row without image or video, shown to a model whose family cannot take one; one line."""


def text_only_refusal(processor: object) -> str | None:
    """Why ``processor``'s family cannot take a text-only row (``TEXT_ONLY_REFUSALS``), or None."""
    for part in (processor, getattr(processor, "image_processor", None)):
        if type(part).__name__ in TEXT_ONLY_REFUSALS:
            return TEXT_ONLY_REFUSALS[type(part).__name__]
    return None


def check_text_only(processor: object, model: str, media_counts: Sequence[int]) -> None:
    """``TextOnlyRowError`` when a row shows no image and no video (its count in ``media_counts`` is 0) and
    ``processor``'s family cannot take such a row (:func:`text_only_refusal`); ``model`` names it."""
    reason = text_only_refusal(processor)
    if reason is not None and 0 in media_counts:
        raise TextOnlyRowError(f"model {model}: a row shows no image ({media_counts.count(0)} of {len(media_counts)} "
                               f"in this batch) and {reason}; leave text-only rows (a mixture's text part) out of "
                               "its runs or use another family")
