"""Build a checkpoint's processor from its files, with or without its video processor.

``AutoProcessor`` first. When the stock processor cannot be built and its class declares a video
processor (transformers' video processors need torchvision; a checkpoint may also declare none),
the same class without it is built from the same files (``image_only_processor.image_only``). The
class is the one the files declare (``processor_class``), else transformers' for the model type.
Whatever the image-only build raises is the error: it is about what images need.
"""

from __future__ import annotations

from collections.abc import Mapping

from transformers import AutoProcessor, ProcessorMixin
from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES, processor_class_from_name

from aerorl_ops.models.image_only_processor import VIDEO_PROCESSOR, image_only


def build_processor(location: str, model_type: str, pretrained_kwargs: Mapping[str, object]) -> ProcessorMixin:
    """The processor of the checkpoint at ``location`` (a folder or hub id), whose config's type is
    ``model_type``; ``pretrained_kwargs`` go to every ``from_pretrained``."""
    try:
        return AutoProcessor.from_pretrained(location, **pretrained_kwargs)
    except (ImportError, OSError, ValueError, KeyError, TypeError) as stock_error:
        files = _processor_dict(location, pretrained_kwargs)
        processor_class = _declared_class(files, model_type)
        if processor_class is None or VIDEO_PROCESSOR not in processor_class.get_attributes():
            raise stock_error
    processor = image_only(processor_class).from_pretrained(location, **pretrained_kwargs)
    video = files.get(VIDEO_PROCESSOR)
    processor.video_processor_type = video.get("video_processor_type") if isinstance(video, dict) else None
    return processor


def _processor_dict(location: str, pretrained_kwargs: Mapping[str, object]) -> dict:
    """The checkpoint's ``processor_config.json`` (empty when it has none or it cannot be read)."""
    try:
        processor_dict, _ = ProcessorMixin.get_processor_dict(location, **pretrained_kwargs)
    except (OSError, ValueError):
        return {}
    return processor_dict


def _declared_class(processor_dict: Mapping[str, object], model_type: str) -> type[ProcessorMixin] | None:
    name = processor_dict.get("processor_class") or PROCESSOR_MAPPING_NAMES.get(model_type)
    if not isinstance(name, str):
        return None
    processor_class = processor_class_from_name(name)
    is_processor = isinstance(processor_class, type) and issubclass(processor_class, ProcessorMixin)
    return processor_class if is_processor else None
