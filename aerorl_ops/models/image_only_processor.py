"""A Qwen2-VL processor without the video processor.

The stock ``Qwen2VLProcessor`` requires a video processor, and transformers' Qwen2-VL video
processor needs torchvision, which does not import with the CPU torch build. Benchmarks and
training here use images only, so this subclass drops the video sub-processor and keeps the
stock image path (the same image processor, chat template and image-token expansion).
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor
from transformers.processing_utils import ProcessorMixin


class Qwen2VLImageOnlyProcessor(Qwen2VLProcessor):
    """``Qwen2VLProcessor`` with attributes ``image_processor`` and ``tokenizer`` only."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)


VIDEO_PROCESSOR_KEYS = ("image_mean", "image_std", "merge_size", "patch_size", "temporal_patch_size")


def save_processor(processor, output_dir: Path) -> None:
    """Save ``processor``; an image-only one is declared as a stock ``Qwen2VLProcessor``, with a
    video processor of the same patch geometry, so tools with torchvision (vLLM) load the folder
    with ``AutoProcessor`` while ours pick the image-only class."""
    processor.save_pretrained(output_dir)
    if not isinstance(processor, Qwen2VLImageOnlyProcessor):
        return
    for name in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        path = Path(output_dir) / name
        if path.exists():
            original = json.loads(path.read_text())
            config = dict(original)
            if "processor_class" in config:
                config["processor_class"] = "Qwen2VLProcessor"
            if "image_processor" in config and "video_processor" not in config:
                image = config["image_processor"]
                config["video_processor"] = {"video_processor_type": "Qwen2VLVideoProcessor",
                                             **{key: image[key] for key in VIDEO_PROCESSOR_KEYS if key in image}}
            if config != original:
                path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
