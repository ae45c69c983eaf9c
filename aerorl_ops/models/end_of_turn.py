"""The token that ends an assistant turn, read from the model's chat template.

The template renders a conversation whose assistant reply is a marker, followed by another user
turn; the first token written after the reply's text (whitespace skipped) ends the turn when it is
one of the tokenizer's special tokens: Qwen's ``<|im_end|>``, Gemma 3's ``<end_of_turn>``, Idefics2's
``<end_of_utterance>`` (not its EOS ``</s>``), GLM's ``<|user|>`` (the next turn's start), LLaVA-NeXT's
EOS ``</s>``. A template that writes no special token there (LLaVA-1.5's ``USER:``) says nothing about
the end of a turn: the tokenizer's EOS is used, with a warning naming the model.
"""

from __future__ import annotations

import functools
import logging

from jinja2 import TemplateError

logger = logging.getLogger(__name__)

REPLY_MARKER = "ZqxReplyMarkerxqZ"
"""The probe's assistant reply: text no template writes by itself."""


def _probe(content_as_parts: bool) -> list[dict]:
    def content(text: str):
        return [{"type": "text", "text": text}] if content_as_parts else text

    return [{"role": "user", "content": content("?")}, {"role": "assistant", "content": content(REPLY_MARKER)},
            {"role": "user", "content": content("?")}]


def text_after_reply(processor) -> str | None:
    """What ``processor``'s chat template writes right after an assistant reply (None: the reply is not
    in what it renders). Message content is tried as a list of parts, then as a string."""
    for as_parts in (True, False):
        try:
            rendered = processor.apply_chat_template(_probe(as_parts), tokenize=False)
        except (TemplateError, TypeError, KeyError, IndexError, ValueError):
            continue
        if REPLY_MARKER in rendered:
            return rendered[rendered.rindex(REPLY_MARKER) + len(REPLY_MARKER):]
    return None


def template_end_of_turn(processor) -> int | None:
    """The id of the special token ``processor``'s chat template writes first after an assistant reply,
    or None where it writes none there."""
    after = text_after_reply(processor)
    if not after or not after.strip():
        return None
    tokenizer = processor.tokenizer
    ids = tokenizer(after.lstrip(), add_special_tokens=False).input_ids
    added = getattr(tokenizer, "added_tokens_decoder", {})
    first = ids[0] if ids else None
    return first if first in added and added[first].special else None


@functools.lru_cache(maxsize=64)
def end_of_turn_id(processor, model: str = "the model") -> int:
    """The id of the token that ends an assistant turn of ``processor``'s model (``model`` names it in
    messages): the chat template's (:func:`template_end_of_turn`), else the tokenizer's EOS, with a warning."""
    if not getattr(processor, "chat_template", None):
        raise ValueError(f"{model} has no chat template, so nothing says which token ends its turn; set the "
                         "model's chat_template")
    token_id = template_end_of_turn(processor)
    if token_id is not None:
        return token_id
    eos = processor.tokenizer.eos_token_id
    if eos is None:
        raise ValueError(f"the chat template of {model} writes no special token after an assistant reply and its "
                         "tokenizer has no EOS: nothing says which token ends its turn; give the model a chat "
                         "template that ends a reply with a special token")
    _warn_once(f"the chat template of {model} writes no special token after an assistant reply; its turns are "
               f"taken to end with the tokenizer's EOS {processor.tokenizer.eos_token!r}")
    return eos


@functools.cache
def _warn_once(message: str) -> None:
    logger.warning(message)
