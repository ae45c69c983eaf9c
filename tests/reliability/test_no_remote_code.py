"""Reliability: a checkpoint's own Python code never runs unless its config entry asks for it.

A local checkpoint folder whose ``config.json`` declares an ``auto_map`` into ``modeling_evil.py``
(which writes a marker file when imported):

* with no local architecture behind it, ``load_vlm(ModelSource(path))`` fails with an error that
  names ``trust_remote_code``, and the marker never appears;
* on top of a real Qwen2-VL checkpoint, the ``auto_map`` is ignored: the model loads with
  transformers' own class and the marker never appears;
* the control: the same folder with ``trust_remote_code=True`` does import it (in a subprocess,
  with transformers' module cache under tmp), so the marker check can fail.

And config parsing keeps ``trust_remote_code`` False unless the entry sets ``true`` explicitly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.models.entry import ModelEntry
from aerorl_ops.models.loading import ModelSource, ModelUnavailableError, load_vlm
from aerorl_ops.models.sources import model_source

AUTO_MAP = {"AutoConfig": "modeling_evil.EvilConfig", "AutoModelForImageTextToText": "modeling_evil.EvilModel",
            "AutoProcessor": "modeling_evil.EvilProcessor"}


def plant_remote_code(folder: Path, marker: Path) -> None:
    """Add ``modeling_evil.py`` to ``folder`` and point every config's ``auto_map`` at it."""
    (folder / "modeling_evil.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('remote code ran')\n"
        "from transformers import PretrainedConfig\n"
        "class EvilConfig(PretrainedConfig):\n"
        "    model_type = 'evil_vlm'\n"
    )
    auto_maps = {"config.json": AUTO_MAP,
                 "processor_config.json": {"AutoProcessor": AUTO_MAP["AutoProcessor"]},
                 "tokenizer_config.json": {"AutoTokenizer": ["modeling_evil.EvilTokenizer", None]}}
    for name, auto_map in auto_maps.items():
        path = folder / name
        config = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**config, "auto_map": auto_map}))


@pytest.fixture
def evil_checkpoint(tmp_path) -> tuple[Path, Path]:
    folder = tmp_path / "evil-checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "evil_vlm", "architectures": ["EvilModel"]}))
    marker = tmp_path / "MARKER"
    plant_remote_code(folder, marker)
    return folder, marker


def test_remote_code_checkpoint_is_refused_and_never_imported(evil_checkpoint):
    folder, marker = evil_checkpoint
    with pytest.raises(ModelUnavailableError) as raised:
        load_vlm(ModelSource(str(folder)), torch.device("cpu"))
    message = str(raised.value)
    assert str(folder) in message and "trust_remote_code=True" in message
    assert not marker.exists()
    assert not any(name.startswith("transformers_modules") and "evil" in name for name in sys.modules)


def test_auto_map_on_a_real_checkpoint_is_ignored(tmp_path, tiny_model_dir):
    folder = tmp_path / "tiny-with-auto-map"
    shutil.copytree(tiny_model_dir, folder)
    marker = tmp_path / "MARKER"
    plant_remote_code(folder, marker)

    loaded = load_vlm(ModelSource(str(folder)), torch.device("cpu"))

    assert type(loaded.model).__module__.startswith("transformers.models.qwen2_vl.")
    assert type(loaded.model).__name__ == "Qwen2VLForConditionalGeneration"
    assert not marker.exists()


def test_control_trust_remote_code_true_does_import_it(evil_checkpoint, tmp_path):
    folder, marker = evil_checkpoint
    script = ("import torch\n"
              "from aerorl_ops.models.loading import ModelSource, load_vlm\n"
              "try:\n"
              f"    load_vlm(ModelSource({str(folder)!r}, trust_remote_code=True), torch.device('cpu'))\n"
              "except Exception as error:\n"
              "    print(type(error).__name__)\n")
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "hf_modules"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert marker.read_text() == "remote code ran"


# --- config parsing -------------------------------------------------------------------------------------

def parse_models(models: dict) -> dict[str, ModelEntry]:
    config = parse_benchmark_config({"benchmark": {"batch_sizes": [1]}, "models": models}, path="bench.toml")
    return {model.key: model for model in config.models}


def test_trust_remote_code_is_false_unless_set_true(tmp_path, models_dir):
    (tmp_path / "ckpt").mkdir()
    models = parse_models({
        "default": {"source": str(tmp_path / "ckpt")},
        "off": {"source": str(tmp_path / "ckpt"), "trust_remote_code": False},
        "on": {"source": str(tmp_path / "ckpt"), "trust_remote_code": True},
        "hub": {"source": "Qwen/Qwen2-VL-2B-Instruct"},
    })
    assert {key: entry.trust_remote_code for key, entry in models.items()} == {
        "default": False, "off": False, "on": True, "hub": False}
    assert ModelEntry("k", "somewhere").trust_remote_code is False
    assert ModelSource("somewhere").pretrained_kwargs()["trust_remote_code"] is False
    # and the flag reaches from_pretrained as configured, for local and hub sources alike
    assert model_source(models["default"], models_dir).pretrained_kwargs()["trust_remote_code"] is False
    assert model_source(models["hub"], models_dir).pretrained_kwargs()["trust_remote_code"] is False
    assert model_source(models["on"], models_dir).pretrained_kwargs()["trust_remote_code"] is True


@pytest.mark.parametrize("value", ["true", "yes", 1, "false"])
def test_trust_remote_code_must_be_a_real_boolean(value):
    with pytest.raises(ConfigError, match=r"'models\.m\.trust_remote_code' must be true or false"):
        parse_models({"m": {"source": "Qwen/Qwen2-VL-2B-Instruct", "trust_remote_code": value}})
