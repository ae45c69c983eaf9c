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


def _content(image_placeholder: str, video_placeholder: str = "") -> str:
    """Message content: its text, with ``image_placeholder`` where an image item is and, for a family whose
    processor takes video, ``video_placeholder`` where a video item is (else a video item writes nothing)."""
    content = _CONTENT_LOOP.replace("IMAGE", image_placeholder)
    if not video_placeholder:
        return content
    return content.replace("{% elif 'text' in item %}",
                           "{% elif item['type'] == 'video' %}" + video_placeholder + "{% elif 'text' in item %}")


QWEN3_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<|vision_start|><|image_pad|><|vision_end|>", "<|vision_start|><|video_pad|><|vision_end|>")
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
    + _content("<image>\n", "<video>\n")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""LLaVA-OneVision (Qwen2 language model): ChatML turns, an image as ``<image>``."""

INTERNVL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<IMG_CONTEXT>\n", "<video>\n")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""InternVL (``-hf`` layout): ChatML turns, an image as ``<IMG_CONTEXT>``."""

IDEFICS3_CHAT_TEMPLATE = (
    "<|begin_of_text|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'] is not string and message['content'][0]['type'] == 'image' %}:{% else %}: {% endif %}"
    + _content("<image>", "<video>")
    + "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)
"""Idefics3 / SmolVLM / SmolVLM2: ``User:`` / ``Assistant:`` turns ended by ``<end_of_utterance>``."""

GLM4V_CHAT_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n"
    + _content("<|begin_of_image|><|image|><|end_of_image|>", "<|begin_of_video|><|video|><|end_of_video|>")
    + "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
"""GLM-4.1V: ``<|user|>`` / ``<|assistant|>`` turns, an image (a video) between its begin and end tokens."""

LLAMA3_VISION_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    + _content("<|image|>")
    + "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
      "{% endif %}"
)
"""Llama 3.2 Vision: header-delimited turns ended by ``<|eot_id|>``, an image as ``<|image|>``."""

AYA_VISION_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|START_OF_TURN_TOKEN|>"
    "{% if message['role'] == 'user' %}<|USER_TOKEN|>{% elif message['role'] == 'assistant' %}<|CHATBOT_TOKEN|>"
    "{% else %}<|SYSTEM_TOKEN|>{% endif %}"
    + _content("<image>")
    + "<|END_OF_TURN_TOKEN|>{% endfor %}{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
      "{% endif %}"
)
"""Aya Vision (Cohere 2 language model): ``<|START_OF_TURN_TOKEN|>`` turns ended by ``<|END_OF_TURN_TOKEN|>``."""

IDEFICS2_CHAT_TEMPLATE = IDEFICS3_CHAT_TEMPLATE.removeprefix("<|begin_of_text|>")
"""Idefics2: Idefics3's turns (the tokenizer writes the BOS); a turn ends with ``<end_of_utterance>``, not
the tokenizer's EOS ``</s>``."""

LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] | upper }}: "
    + _content("<image>\n")
    + " {% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)
"""LLaVA-1.5 (``llava-hf``): ``USER:`` / ``ASSISTANT:`` turns; nothing but a space follows a reply (the
template names no end-of-turn token)."""

LLAVA_NEXT_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}[INST] "
    + _content("<image>\n")
    + " [/INST]{% else %} " + _content("") + "</s>{% endif %}{% endfor %}"
)
"""LLaVA-NeXT (Mistral language model): ``[INST] ... [/INST]``; a reply ends with the EOS ``</s>``."""

MISTRAL3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}[INST]"
    + _content("[IMG]")
    + "[/INST]{% elif message['role'] == 'system' %}[SYSTEM_PROMPT]" + _content("") + "[/SYSTEM_PROMPT]"
    "{% else %}" + _content("") + "{{ eos_token }}{% endif %}{% endfor %}"
)
"""Mistral 3 (Mistral Small 3.1, Pixtral's image tokens): ``[INST] ... [/INST]``, an image as ``[IMG]``; a
reply ends with the EOS ``</s>`` (the released template's default system prompt is left out)."""

LLAMA4_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|header_start|>{{ message['role'] }}<|header_end|>\n\n"
    + _content("<|image|>")
    + "<|eot|>{% endfor %}{% if add_generation_prompt %}<|header_start|>assistant<|header_end|>\n\n{% endif %}"
)
"""Llama 4: header-delimited turns ended by ``<|eot|>``, an image as ``<|image|>``."""

PERCEPTION_LM_CHAT_TEMPLATE = LLAMA3_VISION_CHAT_TEMPLATE
"""PerceptionLM (Llama 3 language model): Llama 3's header-delimited turns ended by ``<|eot_id|>``, an image
as ``<|image|>``."""

GEMMA4_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n"
    + _content("<|image|>", "<|video|>")
    + "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
"""Gemma 4: Gemma's ``<start_of_turn>user`` / ``model`` turns, an image as ``<|image|>`` and a video as
``<|video|>`` (the token texts of transformers' own Gemma 4 tests)."""

ERNIE4_5_VL_CHAT_TEMPLATE = (
    "<|begin_of_sentence|>{% for message in messages %}"
    "{% if message['role'] == 'user' %}User: {% elif message['role'] == 'assistant' %}Assistant: {% endif %}"
    + _content("<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>",
               "<|VIDEO_START|><|VIDEO_PLACEHOLDER|><|VIDEO_END|>")
    + "{% if message['role'] == 'assistant' %}<|end_of_sentence|>{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)
"""ERNIE 4.5-VL: ``User:`` / ``Assistant:`` lines, a reply ended by ``<|end_of_sentence|>``, an image between
``<|IMAGE_START|>`` and ``<|IMAGE_END|>``."""

OVIS2_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<image>\n")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Ovis2 (Qwen2.5 language model): ChatML turns, an image as ``<image>``, which its processor expands into
``<IMG_START>``, ``<IMG_ATOM>`` tokens and grid markers."""

LFM2_VL_CHAT_TEMPLATE = (
    "<|startoftext|>{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<image>")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""LFM2-VL: ChatML turns after ``<|startoftext|>``, an image as ``<image>``."""
