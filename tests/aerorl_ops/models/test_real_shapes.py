"""Random-init checkpoints at published sizes (``models.real_shapes``): the published configuration, cut to two
layers for a CPU test of the same builder; the folder loads and generates like a hub checkpoint."""

import json

import pytest
import torch

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.batched import generate_rows
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.models.real_shapes import REAL_SHAPES, build_real_shape, shape_config


def test_the_published_shapes_and_a_layer_override():
    full = shape_config("qwen2.5-vl-3b")
    assert (full["text_config"]["hidden_size"], full["text_config"]["num_hidden_layers"],
            full["vision_config"]["depth"]) == (2048, 36, 32)
    cut = shape_config("qwen2.5-vl-3b", layers=2)
    assert (cut["text_config"]["num_hidden_layers"], cut["vision_config"]["depth"],
            cut["vision_config"]["fullatt_block_indexes"]) == (2, 2, [1])
    assert full["text_config"]["num_hidden_layers"] == 36  # the table itself is left as it was
    seven = shape_config("qwen2.5-vl-7b")["text_config"]
    assert (seven["hidden_size"], seven["vocab_size"], seven["num_key_value_heads"]) == (3584, 152_064, 4)
    assert set(REAL_SHAPES) == {"smolvlm-500m", "qwen2-vl-2b", "qwen2.5-vl-3b", "qwen2.5-vl-7b"}


def test_an_unknown_shape_names_the_known_ones():
    with pytest.raises(ValueError, match=r"^no real shape 'qwen9'; known: qwen2-vl-2b, qwen2.5-vl-3b, qwen2.5-vl-7b, "
                                         r"smolvlm-500m$"):
        shape_config("qwen9")


@pytest.mark.slow
def test_two_layers_of_smolvlm_500m_load_and_generate_like_a_hub_checkpoint(tmp_path, few_rows):
    folder = build_real_shape("smolvlm-500m", tmp_path / "smolvlm", "cpu", torch.float32, layers=2)
    config = json.loads((folder / "config.json").read_text())
    assert (config["text_config"]["hidden_size"], config["text_config"]["num_hidden_layers"],
            config["text_config"]["vocab_size"], config["vision_config"]["num_hidden_layers"]) == (960, 2, 49_280, 2)
    loaded = load_vlm(ModelSource(str(folder)), torch.device("cpu"))
    assert loaded.model.get_output_embeddings().weight.shape == (49_280, 960)  # the real vocabulary
    samples = generate_rows(loaded, few_rows[:2], batch_size=2, settings=GenerationSettings(max_new_tokens=2))
    assert [s.sample_id for s in samples] == [r.item_id for r in few_rows[:2]]
    assert all(1 <= s.generated_tokens <= 2 and s.vision_tokens > 0 for s in samples)
