"""A model folder that cannot load is one line naming the folder and what is wrong, found from its
config alone (``vlm_config`` / ``check_local_model``) or when its processor is built."""

from __future__ import annotations

import shutil

import pytest

from aerorl_ops.models.entry import ModelEntry
from aerorl_ops.models.loading import ModelSource, ModelUnavailableError, load_processor, vlm_config
from aerorl_ops.models.sources import check_local_model


def one_line_error(call) -> str:
    with pytest.raises(ModelUnavailableError) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_a_folder_without_config_json(tmp_path):
    message = one_line_error(lambda: check_local_model(ModelEntry(key="broken", source=str(tmp_path))))
    assert message == (f"cannot load model '{tmp_path}': the directory '{tmp_path}' exists but is not a loadable "
                       "checkpoint (no config.json in it)")


def test_an_unreadable_config_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    message = one_line_error(lambda: vlm_config(ModelSource(str(tmp_path))))
    assert message.startswith(f"cannot load model '{tmp_path}': the directory '{tmp_path}' exists but is not a "
                              "loadable checkpoint (its config.json cannot be read: ")


def test_a_model_that_is_not_a_vlm(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    message = one_line_error(lambda: vlm_config(ModelSource(str(tmp_path))))
    assert message.endswith("(its model_type 'gpt2' is not a vision-language model that "
                            "AutoModelForImageTextToText loads)")


def test_a_checkpoint_without_its_processor_files(tmp_path, tiny_model_dir):
    folder = tmp_path / "weights-only"
    folder.mkdir()
    shutil.copy(tiny_model_dir / "config.json", folder / "config.json")
    assert vlm_config(ModelSource(str(folder))).model_type == "qwen2_vl"  # its config is a VLM's
    for check in (lambda: load_processor(ModelSource(str(folder))),
                  lambda: check_local_model(ModelEntry(key="weights-only", source=str(folder)))):
        message = one_line_error(check)
        assert message.startswith(f"cannot load model '{folder}': the directory '{folder}' exists but is not a "
                                  "loadable checkpoint (its qwen2_vl processor cannot be built: ")


def test_the_embedded_model_and_hub_ids_are_left_to_the_load(tmp_path):
    check_local_model(ModelEntry(key="tiny", source="embedded:tiny-qwen2-vl"))
    check_local_model(ModelEntry(key="hub", source="some-org/some-vlm"))


def test_a_good_checkpoint_passes(tiny_model_dir):
    check_local_model(ModelEntry(key="tiny", source=str(tiny_model_dir)))
    assert vlm_config(ModelSource(str(tiny_model_dir))).model_type == "qwen2_vl"
