"""Tiny checkpoints of every VLM family load through the project's loader, with the family's own stock
processor (its video processor included), and their images reach the language model. Their vision tokens:
``test_vision_trace.py``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from PIL import Image
from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

from aerorl_ops.generation.prompts import chat_messages
from aerorl_ops.models import processor_files
from aerorl_ops.models.loading import ModelSource, ModelUnavailableError, load_processor, load_vlm
from aerorl_ops.models.tiny_families import family
from aerorl_ops.models.tiny_family_build import build_tiny_family
from aerorl_ops.models.vision_tokens import UnknownVisionTokensError, processor_image_token_ids, vision_token_mask
from tests.aerorl_ops.models.family_params import family_params

TYPED_MASKS = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl", "gemma3", "llava-onevision", "glm4.1v", "qwen3-vl-moe",
               "paligemma", "llava", "llava-next", "qwen3.5", "gemma4", "ernie4.5-vl")
"""Families whose processor's own token-type ids mark exactly the tokens the model fills (InternVL's and Aya
Vision's also mark image delimiters, which their models embed as text)."""
TOKENS_PER_IMAGE = {"smolvlm": 4, "smolvlm2": 4, "gemma3": 4, "paligemma": 4, "idefics2": 4, "llava": 4,
                    "mllama": 1, "aya-vision": 4, "ovis2": 7}
"""Families with a fixed number of vision tokens per image (no tiling at the tiny image size; Llama 3.2 Vision's
one ``<|image|>``, read by cross-attention; Ovis2's 4 ``<IMG_ATOM>`` and 3 visual indicators)."""


def two_prompts(processor):
    texts = [processor.apply_chat_template(chat_messages(q), add_generation_prompt=True, tokenize=False)
             for q in ("What is the total?", "Which year has the highest value?")]
    images = [[Image.new("RGB", (448, 448), (200, 180, 160))], [Image.new("RGB", (448, 336), (20, 80, 160))]]
    return processor(text=texts, images=images, return_tensors="pt", padding=True, return_mm_token_type_ids=True)


@pytest.mark.parametrize("name", family_params(runs_model=False))
def test_each_family_loads_with_its_own_processor_and_its_vision_tokens(name, tiny_family_vlm):
    loaded = tiny_family_vlm(name)
    processor = loaded.processor
    assert type(processor).__name__ == PROCESSOR_MAPPING_NAMES[family(name).model_type]
    video = family(name).video_processor
    assert type(getattr(processor, "video_processor", None)).__name__ == (video[0] if video else "NoneType")
    assert loaded.model.config.model_type == family(name).model_type
    assert processor.tokenizer.padding_side == "left"
    batch = two_prompts(processor)
    mask = vision_token_mask(batch["input_ids"], loaded.vision.token_ids)  # [2, T]
    counts = mask.sum(dim=1).tolist()
    assert min(counts) > 0
    assert not mask[batch["attention_mask"] == 0].any()  # padding is never a vision token
    if name in TYPED_MASKS:
        types = batch.get("mm_token_type_ids", batch.get("token_type_ids"))  # [2, T]
        assert ((types != 0) == mask).all()
    if name in TOKENS_PER_IMAGE:
        assert counts == [TOKENS_PER_IMAGE[name]] * 2


def test_a_video_processor_is_saved_and_loaded_with_its_checkpoint(tiny_family_dir):
    folder = tiny_family_dir("qwen2.5-vl")
    declared = json.loads((folder / "processor_config.json").read_text())
    assert declared["processor_class"] == "Qwen2_5_VLProcessor"
    assert declared["video_processor"]["video_processor_type"] == "Qwen2VLVideoProcessor"
    processor = load_processor(ModelSource(str(folder)))
    assert processor.get_attributes() == ["image_processor", "tokenizer", "video_processor"]
    assert processor.video_processor.patch_size == processor.image_processor.patch_size == 14
    assert processor.video_processor.size == processor.image_processor.size  # the image processor's geometry


def test_a_model_whose_image_token_the_tokenizer_does_not_know_is_named(tiny_vlm):
    stranger = SimpleNamespace(tokenizer=tiny_vlm.tokenizer, image_token="<not-a-token>", image_token_ids=[None])
    with pytest.raises(UnknownVisionTokensError, match="cannot tell which tokens of 'my-vlm' are vision tokens"):
        processor_image_token_ids(stranger, "'my-vlm'")


def test_the_build_is_deterministic_and_unknown_families_are_named(tiny_family_dir, tmp_path):
    first = tiny_family_dir("gemma3")
    second = build_tiny_family("gemma3", tmp_path / "again")
    for path in first.iterdir():
        assert (second / path.name).read_bytes() == path.read_bytes(), path.name
    with pytest.raises(ValueError, match="no tiny checkpoint for family 'gpt2'; known families: qwen2-vl"):
        family("gpt2")


def one_line_error(call) -> str:
    with pytest.raises(ModelUnavailableError) as raised:
        call()
    assert "\n" not in str(raised.value)
    return str(raised.value)


def test_a_processor_that_needs_a_missing_package_is_one_line_naming_the_family_and_it(tiny_family_dir,
                                                                                         monkeypatch):
    folder = tiny_family_dir("gemma3")

    def missing_package(*args, **kwargs):
        raise ImportError("Package `num2words` is required to run this processor.\nInstall it.")

    monkeypatch.setattr(processor_files.AutoProcessor, "from_pretrained", missing_package)
    message = one_line_error(lambda: load_processor(ModelSource(str(folder))))
    assert message == (f"cannot load model '{folder}': the directory '{folder}' exists but is not a loadable "
                       "checkpoint (its gemma3 processor cannot be built: Package `num2words` is required to run "
                       "this processor. Install it.)")


def test_a_processor_that_needs_torchvision_where_it_does_not_import_says_how_to_install_it(tiny_family_dir,
                                                                                            monkeypatch):
    folder = tiny_family_dir("qwen2-vl")

    def no_torchvision(*args, **kwargs):
        raise ImportError("Qwen2VLVideoProcessor requires the Torchvision library but it was not found.")

    monkeypatch.setattr(processor_files.AutoProcessor, "from_pretrained", no_torchvision)
    monkeypatch.setattr(processor_files, "is_torchvision_available", lambda: False)
    message = one_line_error(lambda: load_processor(ModelSource(str(folder))))
    assert message.endswith("(its qwen2_vl processor cannot be built: Qwen2VLVideoProcessor requires the Torchvision "
                            f"library but it was not found. ({processor_files.TORCHVISION_HINT}))")


def test_a_checkpoint_without_weights_is_one_line_naming_it(tiny_family_dir, tmp_path):
    folder = tmp_path / "no-weights"
    folder.mkdir()
    for path in tiny_family_dir("qwen3-vl").iterdir():
        if path.suffix != ".safetensors":
            (folder / path.name).write_bytes(path.read_bytes())
    message = one_line_error(lambda: load_vlm(ModelSource(str(folder)), torch.device("cpu")))
    assert message.startswith(f"cannot load model '{folder}': the directory '{folder}' exists but is not a loadable "
                              "checkpoint (its weights cannot be loaded: ")


@pytest.mark.parametrize("name", family_params())
def test_each_familys_image_reaches_its_language_model(name, tiny_family_vlm):
    """The same question about two different images gives different next-token logits: the vision path
    is alive (Gemma 3's image projection is zero at init, which random_init_model redraws)."""
    loaded = tiny_family_vlm(name)
    text = loaded.processor.apply_chat_template(chat_messages("What colour is this?"), tokenize=False,
                                                add_generation_prompt=True)
    logits = []
    for colour in ((255, 0, 0), (0, 0, 255)):
        image = Image.new("RGB", (64, 64), colour)
        batch = loaded.on_device(loaded.processor(text=[text], images=[[image]], return_tensors="pt", padding=True))
        with torch.inference_mode():
            logits.append(loaded.model(**batch).logits[0, -1])  # [V]
    assert not torch.allclose(logits[0], logits[1], atol=1e-6)
