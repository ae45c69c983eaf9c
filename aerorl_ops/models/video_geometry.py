"""A family's stock video processor with its image processor's geometry, for a checkpoint built here (the
embedded default, the tiny family checkpoints): the same patch and merge sizes, resize bounds, mean and
std, so a video frame makes the tokens an image of its size makes, as in the family's released checkpoints.
"""

from __future__ import annotations

GEOMETRY_KEYS = ("image_mean", "image_std", "max_image_size", "merge_size", "patch_size", "size",
                 "temporal_patch_size")
"""The image processor's settings a video processor of the same family takes as they are."""


def matching_video_processor(class_name: str, image_processor, **overrides):
    """transformers' ``class_name`` video processor with ``image_processor``'s geometry (:data:`GEOMETRY_KEYS`
    it has), ``overrides`` on top.

    >>> from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    >>> video = matching_video_processor("Qwen2VLVideoProcessor", Qwen2VLImageProcessorPil(min_pixels=3136))
    >>> type(video).__name__, video.size.shortest_edge, video.patch_size
    ('Qwen2VLVideoProcessor', 3136, 14)
    """
    import transformers

    settings = image_processor.to_dict()
    geometry = {key: settings[key] for key in GEOMETRY_KEYS if settings.get(key) is not None}
    return getattr(transformers, class_name)(**{**geometry, **overrides})
