"""The chat template a model's prompts are rendered with (``models.prompt_template``): the configured one,
the checkpoint's own, or PaliGemma's prompt format; none is one line naming the model and the fix."""

from __future__ import annotations

import doctest
import json
import shutil
from pathlib import Path

import pytest
import torch
from PIL import Image

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.generation.prompts import chat_messages, row_prompt
from aerorl_ops.models import prompt_template
from aerorl_ops.models.end_of_turn import end_of_turn_id
from aerorl_ops.models.errors import ModelUnavailableError
from aerorl_ops.models.loading import ModelSource, load_processor, load_vlm
from aerorl_ops.models.prompt_template import PALIGEMMA_PROMPT_FORMAT
from aerorl_ops.models.sources import model_source

GEMMA_TURNS = ("{% for message in messages %}{% if message['role'] == 'user' %}"
               "{% for item in message['content'] %}{% if item['type'] == 'image' %}<image>"
               "{% else %}question: {{ item['text'] }}{% endif %}{% endfor %}"
               "{% else %}{{ message['content'][0]['text'] }}<pad>{% endif %}{% endfor %}")
"""A made-up PaliGemma chat template: a ``question:`` prefix, and a reply ended by ``<pad>``."""


def test_the_docstring_examples():
    result = doctest.testmod(prompt_template)
    assert result.failed == 0 and result.attempted > 0


def test_paligemma_without_a_template_is_prompted_in_its_own_format(tiny_family_dir):
    folder = tiny_family_dir("paligemma")
    assert not (folder / "chat_template.jinja").exists()
    assert "chat_template" not in json.loads((folder / "processor_config.json").read_text())  # as stock checkpoints
    processor = load_processor(ModelSource(str(folder)))
    assert processor.chat_template == PALIGEMMA_PROMPT_FORMAT
    text = processor.apply_chat_template(chat_messages("What shape?", "What shape?\nOne word."),
                                         add_generation_prompt=True, tokenize=False)
    assert text == "<image>" + row_prompt("What shape?", "What shape?\nOne word.")
    ids = processor(text=[text], images=[[Image.new("RGB", (32, 32))]], return_tensors="pt")["input_ids"][0]
    tokens = processor.tokenizer.convert_ids_to_tokens(ids)
    assert tokens[:5] == ["<image>"] * 4 + ["<bos>"] and processor.tokenizer.decode(ids[5:]) == (
        "What shape?\nOne word.\n")  # image tokens, BOS, the question and a newline


def test_a_configured_template_is_the_one_prompts_use(tiny_family_dir):
    source = ModelSource(str(tiny_family_dir("paligemma")), chat_template=GEMMA_TURNS)
    loaded = load_vlm(source, torch.device("cpu"))
    text = loaded.processor.apply_chat_template(chat_messages("Q?", "Q?"), add_generation_prompt=True, tokenize=False)
    assert text == "<image>question: Q?"
    assert end_of_turn_id(loaded.processor, source.label) == loaded.tokenizer.pad_token_id


def without_template(folder: Path, into: Path) -> Path:
    """A copy of the checkpoint ``folder`` with no chat template anywhere in its files."""
    shutil.copytree(folder, into)
    (into / "chat_template.jinja").unlink(missing_ok=True)
    for name in ("processor_config.json", "tokenizer_config.json"):
        path = into / name
        if path.exists():
            config = json.loads(path.read_text())
            config.pop("chat_template", None)
            path.write_text(json.dumps(config))
    return into


def test_a_model_without_a_template_is_one_line_naming_it_and_the_setting(tiny_family_dir, tmp_path):
    folder = without_template(tiny_family_dir("qwen3-vl"), tmp_path / "bare")
    with pytest.raises(ModelUnavailableError) as raised:
        load_processor(ModelSource(str(folder), key="bare-vlm"))
    assert str(raised.value) == (f"model 'bare-vlm' ({folder}) has no chat template (a qwen3_vl checkpoint without "
                                 "chat_template.jinja): set chat_template in its [models.<key>] table, a template file "
                                 "or the Jinja text itself")
    assert load_processor(ModelSource(str(folder), chat_template=GEMMA_TURNS)).chat_template == GEMMA_TURNS


def test_a_model_s_chat_template_setting_is_a_file_or_the_text(tmp_path):
    (tmp_path / "turns.jinja").write_text(GEMMA_TURNS)
    models = {"from-file": {"source": "embedded:tiny-qwen2-vl", "chat_template": "turns.jinja"},
              "inline": {"source": "embedded:tiny-qwen2-vl", "chat_template": GEMMA_TURNS},
              "own": {"source": "embedded:tiny-qwen2-vl"}}
    config = parse_benchmark_config({"benchmark": {"batch_sizes": [1]}, "models": models}, "bench.toml", tmp_path)
    assert [config.model(key).chat_template for key in models] == [GEMMA_TURNS, GEMMA_TURNS, ""]
    entry = config.model("inline")
    assert model_source(entry, tmp_path, builders={"tiny-qwen2-vl": lambda folder: folder}).chat_template == GEMMA_TURNS
    missing = {"m": {"source": "embedded:tiny-qwen2-vl", "chat_template": "nowhere.jinja"}}
    with pytest.raises(ConfigError, match=r"^bench.toml: setting 'models.m.chat_template' names '.*nowhere.jinja', "
                                          "which is not a file"):
        parse_benchmark_config({"benchmark": {"batch_sizes": [1]}, "models": missing}, "bench.toml", tmp_path)
