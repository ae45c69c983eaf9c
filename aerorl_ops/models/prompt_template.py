"""The chat template a model's prompts are rendered with.

In order: the model's configured ``chat_template`` (``[models.<key>] chat_template``, a template file
or the Jinja text itself), else the checkpoint's own, else its family's own prompt format where the
family's checkpoints ship none (:data:`FAMILY_PROMPT_FORMATS`: PaliGemma's). A model with none of
these is a one-line ``ModelUnavailableError`` naming it and the setting that fixes it.
"""

from __future__ import annotations

from aerorl_ops.models.errors import ModelUnavailableError

PALIGEMMA_PROMPT_FORMAT = (
    "{% for message in messages %}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or 'image' in item %}{% if message['role'] != 'assistant' %}<image>{% endif %}"
    "{% elif 'text' in item %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}"
)
"""PaliGemma's own prompt format as a chat template: an ``<image>`` per image, then the question (the
processor expands each ``<image>``, writes BOS after the last and a newline after the text); a reply
is its text followed by EOS, as PaliGemma's processor writes a fine-tuning suffix."""

FAMILY_PROMPT_FORMATS = {"paligemma": PALIGEMMA_PROMPT_FORMAT}
"""By ``config.model_type``: the prompt format of families whose stock checkpoints ship no chat template."""


def template_text(value: str) -> bool:
    """Whether a ``chat_template`` setting is the Jinja text itself (else it names a file).

    >>> template_text("{{ messages[0]['content'] }}"), template_text("templates/paligemma.jinja")
    (True, False)
    """
    return "{{" in value or "{%" in value


def use_prompt_template(processor, model_type: str, configured: str, model: str) -> None:
    """Give ``processor`` the chat template its prompts are rendered with (module docstring): ``configured``
    (the template text; empty: none configured), else its own, else ``model_type``'s prompt format; else
    ``ModelUnavailableError`` naming ``model`` (how messages name it)."""
    if configured:
        processor.chat_template = configured
    elif not getattr(processor, "chat_template", None):
        if model_type not in FAMILY_PROMPT_FORMATS:
            raise ModelUnavailableError(
                f"model {model} has no chat template (a {model_type} checkpoint without chat_template.jinja): set "
                "chat_template in its [models.<key>] table, a template file or the Jinja text itself")
        processor.chat_template = FAMILY_PROMPT_FORMATS[model_type]
