"""Any image-text-to-text model type as a tiny checkpoint from its own config defaults, shrunk
(``aerorl_ops.models.shrunk_family``): one that builds loads through the project's loader with its processor's image
token as its vision token; one that cannot says why in one line."""

from __future__ import annotations

import doctest
import re

import pytest
import torch

from aerorl_ops.models import shrunk_family
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.models.shrunk_family import NotBuilt, build_shrunk_family, image_text_to_text_types
from aerorl_ops.models.tiny_families import FAMILIES


def test_the_docstring_examples_hold():
    assert doctest.testmod(shrunk_family).failed == 0


def test_every_tiny_family_is_an_image_text_to_text_model_type():
    types = image_text_to_text_types()
    assert types == sorted(set(types)) and {spec.model_type for spec in FAMILIES.values()} <= set(types)


@pytest.mark.slow
def test_video_llava_shrunk_from_its_defaults_loads_with_its_image_token_traced(tmp_path):
    model_dir = build_shrunk_family("video_llava", tmp_path / "video_llava")

    loaded = load_vlm(ModelSource(str(model_dir)), torch.device("cpu"))

    config = loaded.model.config
    assert (config.text_config.num_hidden_layers, config.text_config.hidden_size) == (1, 64)
    assert (config.vision_config.num_hidden_layers, config.vision_config.hidden_size) == (1, 32)
    image_id = loaded.tokenizer.convert_tokens_to_ids(loaded.processor.image_token)
    assert config.image_token_id == image_id and image_id in loaded.vision.token_ids
    assert sum(p.numel() for p in loaded.model.parameters()) < 2_000_000


@pytest.mark.parametrize(("model_type", "why"), [
    ("fast_vlm", "no processor class (AutoProcessor has none for it)"),
    ("evolla", "no image processor class for its processor EvollaProcessor")])
def test_a_model_type_that_cannot_be_built_says_why(tmp_path, model_type, why):
    with pytest.raises(NotBuilt, match=f"^{re.escape(why)}$"):
        build_shrunk_family(model_type, tmp_path / model_type)
    assert not (tmp_path / model_type).exists()
