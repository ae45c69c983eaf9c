"""Vision tokens and vision parts read from each family's model (``models.vision_trace``): the token ids are
those whose positions the model's own forward fills with features on any batch, a family whose processor
names other tokens (Ovis2) is counted by what its model fills, a model with no vision path is an error, and
``FAMILY_PARTS`` overrides a trace where it is wrong. Each family's traced encoder and projector, and LoRA and
freezing on them: ``tests/aerorl_ops/rl/run/test_family_training.py``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from PIL import Image
from transformers import BatchFeature

from aerorl_ops.generation.prompts import chat_messages
from aerorl_ops.models import family_parts
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.models.vision_tokens import UnknownVisionTokensError, vision_token_mask
from aerorl_ops.models.vision_trace import filled_mask, trace_vision
from tests.aerorl_ops.models.family_params import family_params

_QWEN = ("<|image_pad|>", "<|video_pad|>")
VISION_TOKENS = {
    "qwen2-vl": _QWEN, "qwen2.5-vl": _QWEN, "qwen3-vl": _QWEN, "qwen3-vl-moe": _QWEN, "qwen3.5": _QWEN,
    "smolvlm": ("<image>",), "smolvlm2": ("<image>",), "idefics2": ("<image>",), "gemma3": ("<image_soft_token>",),
    "llava-onevision": ("<image>", "<video>"), "internvl": ("<IMG_CONTEXT>",), "paligemma": ("<image>",),
    "mllama": ("<|image|>",), "aya-vision": ("<|IMG_PATCH|>",), "llava": ("<image>",), "llava-next": ("<image>",),
    "glm4.1v": ("<|image|>",), "mistral3": ("[IMG]",), "llama4": ("<|patch|>",),
    "perception-lm": ("<|image|>", "<|video|>"), "gemma4": ("<|image|>", "<|video|>"),
    "ernie4.5-vl": ("<|IMAGE_PLACEHOLDER|>", "<|VIDEO_PLACEHOLDER|>"),
    "ovis2": ("<IMG_START>", "<IMG_ATOM>", "<IMG_GRID>", "<IMG_END>"), "lfm2-vl": ("<image>",),
}
"""Each family's vision tokens, by hand from transformers' modeling code: the tokens its forward fills with image
and video features (SmolVLM2's, InternVL's and GLM-4.1V's video frames fill their image tokens; Ovis2's visual
indicators are filled from its visual embedding table; Llama 3.2 Vision reads its images by cross-attention at
``<|image|>``). Delimiters the model embeds as text are not vision tokens (Qwen's ``<|vision_start|>``,
InternVL's ``<img>``, Aya Vision's tile markers, Mistral 3's ``[IMG_BREAK]``)."""
CROSS_ATTENTION = ("mllama",)


def two_prompts(loaded):
    texts = [loaded.processor.apply_chat_template(chat_messages(q), add_generation_prompt=True, tokenize=False)
             for q in ("What is the total?", "Which year has the highest value?")]
    images = [[Image.new("RGB", (448, 448), (200, 180, 160))], [Image.new("RGB", (448, 336), (20, 80, 160))]]
    return loaded.on_device(loaded.processor(text=texts, images=images, return_tensors="pt", padding=True))


@pytest.mark.parametrize("name", family_params(runs_model=False))
def test_each_family_s_vision_tokens_are_where_its_model_puts_image_features(name, tiny_family_vlm):
    loaded = tiny_family_vlm(name)
    vision = loaded.vision
    assert tuple(loaded.tokenizer.convert_ids_to_tokens(list(vision.token_ids))) == VISION_TOKENS[name]
    batch = two_prompts(loaded)
    mask = vision_token_mask(batch["input_ids"], vision.token_ids)  # [2, T]
    assert (mask.sum(dim=1) > 0).all() and not mask[batch["attention_mask"] == 0].any()
    if name in CROSS_ATTENTION:  # nothing is filled: the images are read at their token
        assert vision.how == "cross-attention (the processor's image token)"
        assert not filled_mask(loaded.model, batch).any()
    else:  # the same positions as the model's own feature scatter on this batch
        assert vision.how == "feature scatter"
        assert torch.equal(filled_mask(loaded.model, batch), mask.cpu())


def test_ovis2_counts_the_tokens_its_model_fills_not_its_processor_s_image_token(tiny_family_vlm):
    """Ovis2's processor names ``<image>``, which it expands into ``<IMG_START>``, 4 ``<IMG_ATOM>`` (the tiny
    checkpoint's ``image_seq_length``), ``<IMG_GRID>`` and ``<IMG_END>``: a count from the processor's token
    list was 0."""
    loaded = tiny_family_vlm("ovis2")
    batch = two_prompts(loaded)
    processor_tokens = (batch["input_ids"] == loaded.processor.image_token_id).sum(dim=1)
    assert processor_tokens.tolist() == [0, 0]
    assert vision_token_mask(batch["input_ids"], loaded.vision.token_ids).sum(dim=1).tolist() == [7, 7]


class Blind(torch.nn.Module):
    """A model whose forward takes images and uses none: no module gets the pixels, no feature is scattered."""

    def __init__(self):
        super().__init__()
        self.embed, self.decoder = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4)
        self.config = SimpleNamespace(model_type="blind")

    def get_input_embeddings(self):
        return self.embed

    def get_decoder(self):
        return self.decoder

    def forward(self, input_ids, pixel_values, use_cache):
        return self.decoder(self.embed(input_ids))


class BlindProcessor:
    video_processor = None

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        return "an image: <image>"

    def __call__(self, text, images, return_tensors, padding):
        return BatchFeature({"input_ids": torch.tensor([[1, 2, 3]]), "pixel_values": torch.zeros(1, 3, 4, 4)})


def test_a_model_whose_images_reach_nothing_is_an_error_naming_it_not_a_count_of_zero():
    with pytest.raises(UnknownVisionTokensError) as raised:
        trace_vision(Blind(), BlindProcessor(), "'blind-vlm'", lambda inputs: inputs)
    assert str(raised.value) == ("cannot tell which tokens of 'blind-vlm' are vision tokens: a probe prompt with an "
                                 "image ran through Blind and no module took its pixels nor was any feature scattered "
                                 "into its embeddings")


def test_an_override_replaces_the_traced_parts_where_the_trace_is_wrong(tiny_family_dir, monkeypatch):
    """GLM-4.1V's merger takes the language model's width from the convolution before it, so the trace sees no
    module that maps another width to it; ``FAMILY_PARTS`` names the merger."""
    folder = str(tiny_family_dir("glm4.1v"))
    loaded = load_vlm(ModelSource(folder), torch.device("cpu"))
    assert loaded.vision.parts == family_parts.FAMILY_PARTS["glm4v"] == family_parts.FamilyParts(
        ("visual",), ("visual.merger",))
    monkeypatch.setattr(family_parts, "FAMILY_PARTS", {})
    monkeypatch.setattr("aerorl_ops.models.vision_trace.FAMILY_PARTS", {})
    traced = load_vlm(ModelSource(folder), torch.device("cpu")).vision.parts
    assert traced == family_parts.FamilyParts(("model.visual",), ())
