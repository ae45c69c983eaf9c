"""Processors without their video sub-processor, for any VLM family.

Several stock processors (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, LLaVA-OneVision, InternVL, SmolVLM2,
GLM-4.1V...) declare a video processor, and transformers' video processors need torchvision, which
does not import with the CPU torch build. Benchmarks and training here use images only, so
``image_only(processor_class)`` makes a subclass of the stock class whose sub-processors are the
stock ones less ``video_processor``: the same image processor, tokenizer, chat template and
image-token expansion, built from the same files. Videos passed to it are an error.

``save_processor`` saves such a processor declared as its stock class, with a video processor of
the same patch geometry, so tools with torchvision (vLLM) load the folder with ``AutoProcessor``.
"""

from __future__ import annotations

import functools
import inspect
import json
import types
from pathlib import Path

from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor
from transformers.processing_utils import ProcessorMixin

VIDEO_PROCESSOR = "video_processor"


class NoVideoProcessor:
    """What an image-only processor has in place of a video processor: its settings are None (what a
    stock method reads, such as SmolVLM's frame rate when it renders a chat), and videos are an error."""

    def __getattr__(self, name: str) -> None:
        if name.startswith("_"):
            raise AttributeError(name)
        return None

    def __call__(self, *args, **kwargs):
        raise ValueError("this processor was built without its video processor (transformers' need torchvision); "
                         "pass images only, or install torchvision to process videos")


class ImageOnlyProcessor:
    """Mixin of the image-only classes: ``video_processor`` is not one of their sub-processors."""

    video_processor = NoVideoProcessor()

    stock_class: type[ProcessorMixin]
    video_processor_type: str | None = None
    """The stock video processor class its checkpoint declares (what ``save_processor`` declares again)."""

    @classmethod
    def get_attributes(cls) -> list[str]:
        return [name for name in super().get_attributes() if name != VIDEO_PROCESSOR]  # type: ignore[misc]


@functools.cache
def image_only(processor_class: type[ProcessorMixin]) -> type[ProcessorMixin]:
    """``processor_class`` without its video processor (itself when it has none).

    Its ``__init__`` is the stock one: the video processor it passes on is ``None`` and dropped, as
    ``ProcessorMixin`` only keeps the sub-processors ``get_attributes`` names.
    """
    if VIDEO_PROCESSOR not in processor_class.get_attributes() or issubclass(processor_class, ImageOnlyProcessor):
        return processor_class
    name = processor_class.__name__.removesuffix("Processor") + "ImageOnlyProcessor"
    namespace = {"stock_class": processor_class, "__module__": __name__,
                 "__doc__": f"``{processor_class.__name__}`` with no video processor."}
    video = inspect.signature(processor_class.__init__).parameters.get(VIDEO_PROCESSOR)
    if video is not None and video.default is inspect.Parameter.empty:
        namespace["__init__"] = _video_processor_optional(processor_class.__init__)
    return type(name, (ImageOnlyProcessor, processor_class), namespace)


def _video_processor_optional(stock_init):
    """``stock_init`` (the same code, which transformers inspects) where ``video_processor`` defaults
    to None: SmolVLM's is a required argument."""
    code = stock_init.__code__
    positional = code.co_varnames[:code.co_argcount]
    defaults = stock_init.__defaults__ or ()
    missing = code.co_argcount - positional.index(VIDEO_PROCESSOR) - len(defaults)
    init = types.FunctionType(code, stock_init.__globals__, "__init__", (None,) * missing + defaults,
                              stock_init.__closure__)
    init.__kwdefaults__ = stock_init.__kwdefaults__
    return init


Qwen2VLImageOnlyProcessor = image_only(Qwen2VLProcessor)
"""The embedded default's processor."""

VIDEO_PROCESSOR_KEYS = ("image_mean", "image_std", "max_image_size", "merge_size", "patch_size", "size",
                        "temporal_patch_size")


def save_processor(processor, output_dir: Path) -> None:
    """Save ``processor``; an image-only one is declared as its stock class, with a video processor
    (its ``video_processor_type``) of the same patch geometry, so tools with torchvision (vLLM) load
    the folder with ``AutoProcessor`` while ours build the image-only class."""
    processor.save_pretrained(output_dir)
    if not isinstance(processor, ImageOnlyProcessor):
        return
    video_type = processor.video_processor_type
    for name in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        path = Path(output_dir) / name
        if path.exists():
            original = json.loads(path.read_text())
            config = dict(original)
            if "processor_class" in config:
                config["processor_class"] = processor.stock_class.__name__
            if "image_processor" in config and VIDEO_PROCESSOR not in config and video_type:
                image = config["image_processor"]
                config[VIDEO_PROCESSOR] = {"video_processor_type": video_type,
                                           **{key: image[key] for key in VIDEO_PROCESSOR_KEYS if key in image}}
            if config != original:
                path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
