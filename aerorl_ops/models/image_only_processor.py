"""A Qwen2-VL processor without the video processor.

The stock ``Qwen2VLProcessor`` requires a video processor, and transformers' Qwen2-VL video
processor needs torchvision, which does not import with the CPU torch build. Benchmarks and
training here use images only, so this subclass drops the video sub-processor and keeps the
stock image path (the same image processor, chat template and image-token expansion).
"""

from __future__ import annotations

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
