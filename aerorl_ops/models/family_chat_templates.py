"""Chat templates of the VLM families the tiny checkpoints (``tiny_families``) are built for.

Each renders a conversation as that family's released instruct checkpoints do: the same turn
markers, the same image placeholder (which the family's processor then expands into its image
tokens) and the same generation prompt. Qwen2-VL's (and Qwen2.5-VL's) is ``chat_template``'s.
"""

from __future__ import annotations

_CONTENT_LOOP = ("{% if message['content'] is string %}{{ message['content'] }}"
                 "{% else %}{% for item in message['content'] %}"
                 "{% if item['type'] == 'image' or 'image' in item %}IMAGE"
                 "{% elif 'text' in item %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}")


def _content(image_placeholder: str) -> str:
    """Message content: its text, with ``image_placeholder`` where an image item is."""
    return _CONTENT_LOOP.replace("IMAGE", image_placeholder)


QWEN3_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<|vision_start|><|image_pad|><|vision_end|>")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen3-VL instruct: Qwen's turns without a default system prompt."""

GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n"
    + _content("<start_of_image>")
    + "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
"""Gemma 3: ``<start_of_turn>user`` / ``model`` turns, an image as ``<start_of_image>``."""

LLAVA_ONEVISION_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<image>\n")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""LLaVA-OneVision (Qwen2 language model): ChatML turns, an image as ``<image>``."""

INTERNVL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<IMG_CONTEXT>\n")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""InternVL (``-hf`` layout): ChatML turns, an image as ``<IMG_CONTEXT>``."""

IDEFICS3_CHAT_TEMPLATE = (
    "<|begin_of_text|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'] is not string and message['content'][0]['type'] == 'image' %}:{% else %}: {% endif %}"
    + _content("<image>")
    + "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)
"""Idefics3 / SmolVLM / SmolVLM2: ``User:`` / ``Assistant:`` turns ended by ``<end_of_utterance>``."""

GLM4V_CHAT_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n"
    + _content("<|begin_of_image|><|image|><|end_of_image|>")
    + "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
"""GLM-4.1V: ``<|user|>`` / ``<|assistant|>`` turns, an image between its begin and end tokens."""
