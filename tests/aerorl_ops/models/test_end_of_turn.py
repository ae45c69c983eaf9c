"""The token that ends an assistant turn, read from each family's chat template (``models.end_of_turn``)."""

from __future__ import annotations

import logging

import pytest

from aerorl_ops.models import end_of_turn as eot
from aerorl_ops.models.end_of_turn import end_of_turn_id, template_end_of_turn, text_after_reply


@pytest.mark.parametrize(("name", "written", "token"), [
    ("qwen2-vl", "<|im_end|>\n<|im_start|>user\n?<|im_end|>\n", "<|im_end|>"),
    ("gemma3", "<end_of_turn>\n<start_of_turn>user\n?<end_of_turn>\n", "<end_of_turn>"),
    ("glm4.1v", "<|user|>\n?", "<|user|>"),  # the next turn's start ends a reply
    ("idefics2", "<end_of_utterance>\nUser: ?<end_of_utterance>\n", "<end_of_utterance>"),  # not its EOS </s>
    ("llava-next", "</s>[INST] ? [/INST]", "</s>"),  # the template writes the EOS itself
    ("paligemma", "<eos>?", "<eos>"),  # PaliGemma's prompt format: a reply ends with EOS
])
def test_the_end_of_a_turn_is_what_the_template_writes_after_a_reply(tiny_family_vlm, name, written, token):
    processor = tiny_family_vlm(name).processor
    assert text_after_reply(processor) == written
    assert template_end_of_turn(processor) == processor.tokenizer.convert_tokens_to_ids(token)
    assert end_of_turn_id(processor, name) == processor.tokenizer.convert_tokens_to_ids(token)


def test_idefics2_s_turn_does_not_end_with_its_eos(tiny_family_vlm):
    tokenizer = tiny_family_vlm("idefics2").tokenizer
    assert tokenizer.eos_token == "</s>"
    assert end_of_turn_id(tiny_family_vlm("idefics2").processor) != tokenizer.eos_token_id


def test_a_template_that_writes_no_special_token_after_a_reply_means_eos_with_a_warning(tiny_family_vlm, caplog):
    processor = tiny_family_vlm("llava").processor  # LLaVA-1.5: "ASSISTANT: reply USER: ..."
    assert text_after_reply(processor) == " USER: ? "
    assert template_end_of_turn(processor) is None
    end_of_turn_id.cache_clear()
    eot._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger="aerorl_ops.models.end_of_turn"):
        assert end_of_turn_id(processor, "'my-llava'") == processor.tokenizer.eos_token_id
    assert caplog.messages == ["the chat template of 'my-llava' writes no special token after an assistant reply; "
                               "its turns are taken to end with the tokenizer's EOS '</s>'"]


class Bare:
    """A processor without a chat template."""

    chat_template = None


def test_a_model_without_a_chat_template_is_named():
    with pytest.raises(ValueError, match="^'bare' has no chat template, so nothing says which token ends its turn"):
        end_of_turn_id(Bare(), "'bare'")
