"""The embedded default model: a deterministic build that loads like any real checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForImageTextToText, Qwen2VLForConditionalGeneration, Qwen2VLProcessor

from aerorl_ops.models.embedded_default import BUILD_MARKER, TinyQwen2VLSpec, build_tiny_qwen2vl
from aerorl_ops.models.loading import ModelSource, ModelUnavailableError, load_processor, resolve_device

SPECIAL_TOKEN_IDS = {
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
}


def file_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_two_builds_are_byte_identical(tiny_model_dir: Path, tmp_path: Path):
    second = build_tiny_qwen2vl(tmp_path / "again")
    first_files, second_files = file_bytes(tiny_model_dir), file_bytes(second)
    assert {"config.json", "model.safetensors", "tokenizer.json", BUILD_MARKER} <= set(first_files)
    assert first_files.keys() == second_files.keys()
    for name in first_files:
        assert first_files[name] == second_files[name], name


def test_rebuilding_the_same_spec_is_skipped(tiny_model_dir: Path):
    written_at = (tiny_model_dir / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_qwen2vl(tiny_model_dir) == tiny_model_dir
    assert (tiny_model_dir / "model.safetensors").stat().st_mtime_ns == written_at


def test_spec_rejects_sizes_that_are_not_multiples_of_64():
    with pytest.raises(ValueError, match="hidden_size=100"):
        TinyQwen2VLSpec(hidden_size=100)


def test_reloads_through_the_auto_classes(tiny_model_dir: Path):
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    assert isinstance(model, Qwen2VLForConditionalGeneration)
    spec = TinyQwen2VLSpec()
    text = model.config.text_config
    assert (text.hidden_size, text.num_hidden_layers, model.config.vision_config.depth) == (
        spec.hidden_size, spec.num_layers, spec.vision_depth)
    assert model.generation_config.do_sample is False
    processor = load_processor(ModelSource(str(tiny_model_dir)))
    assert isinstance(processor, Qwen2VLProcessor) and processor.get_attributes() == ["image_processor", "tokenizer",
                                                                                    "video_processor"]
    assert processor.tokenizer.padding_side == "left"
    assert processor.chat_template and "<|image_pad|>" in processor.chat_template
    assert processor.tokenizer.eos_token == "<|im_end|>"
    assert model.generation_config.eos_token_id == processor.tokenizer.eos_token_id


def test_saved_config_token_ids_are_the_tokenizers(tiny_model_dir: Path):
    saved = json.loads((tiny_model_dir / "config.json").read_text())
    tokenizer = load_processor(ModelSource(str(tiny_model_dir))).tokenizer
    config = AutoConfig.from_pretrained(tiny_model_dir)
    for attribute, token in SPECIAL_TOKEN_IDS.items():
        token_id = tokenizer.convert_tokens_to_ids(token)
        assert token_id != tokenizer.unk_token_id and tokenizer.convert_ids_to_tokens(token_id) == token
        assert saved[attribute] == token_id, attribute
        assert getattr(config, attribute) == token_id, attribute
    assert config.text_config.vocab_size >= len(tokenizer)


def test_missing_checkpoint_is_reported_by_path(tmp_path: Path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelUnavailableError, match="no checkpoint directory at") as raised:
        load_processor(ModelSource(str(missing)))
    assert str(missing) in str(raised.value)


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda")
