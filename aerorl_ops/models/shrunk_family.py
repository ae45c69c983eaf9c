"""A tiny random-init checkpoint of any image-text-to-text model type transformers ships, built offline from its
own classes' defaults, shrunk: the generic counterpart of ``tiny_families``' hand-written table.

``build_shrunk_family(model_type, output_dir)`` takes the model type's config class with its defaults and shrinks
every config in it (the text and vision configs and any other sub-config): one layer, widths of 32 to 64, two
attention heads, the vocabulary of the tokenizer it builds. The tokenizer is the tiny families' (byte-level BPE on
the embedded default's corpus: ``tiny_family_build.train_family_tokenizer``) with the special tokens the model
type's processor names by default (its ``image_token`` and the like), the processor is the model type's stock
processor with its stock image (and video) processor at their defaults, and the chat template a plain one that
writes the processor's own image placeholder for an image part. The config's image token ids are the
tokenizer's ids of the processor's tokens.

Many model types cannot be built so (a processor that needs files, a config whose sizes must agree in ways the
shrinking does not know, a model that is not a decoder with an image tower): ``build_shrunk_family`` raises
:class:`NotBuilt` with the first reason, in one line.
"""

from __future__ import annotations

import inspect
from pathlib import Path

TEXT_WIDTH, VISION_WIDTH = 64, 32
HEAD_DIM = 32
SHRUNK = {
    "num_hidden_layers": 1, "num_layers": 1, "depth": 1, "encoder_layers": 1, "decoder_layers": 1, "n_layers": 1,
    "num_attention_heads": 2, "num_heads": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "num_key_value_heads": 2, "num_experts": 2, "num_local_experts": 2, "n_routed_experts": 2,
    "num_experts_per_tok": 1, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64,
}
"""Config keys set wherever a config has them (its own value kept where it is smaller)."""
LAYER_COUNTS = ("num_hidden_layers", "num_layers", "depth", "n_layers")
WIDTHS = ("hidden_size", "d_model", "embed_dim", "n_embd")
INTERMEDIATES = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "mlp_dim", "n_inner")
TEXT_WIDTHS = ("out_hidden_size", "text_hidden_size")
"""A vision config's keys for the width its features reach the language model with."""
FIRST_LAYER = {"deepstack_visual_indexes": [0], "fullatt_block_indexes": [0]}
TOKEN_NAMES = ("image_token", "video_token", "audio_token", "boi_token", "eoi_token", "image_start_token",
               "image_end_token", "image_break_token", "image_pad_token", "start_image_token", "end_image_token",
               "vision_start_token", "vision_end_token", "image_context_token", "global_image_token",
               "fake_image_token", "image_row_token")
"""Token attributes a processor may read off its tokenizer: each named on the tiny tokenizer (the processor's own
default string where its constructor has one)."""
BASE_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
MISSING_TOKENS = 8
"""How many more token attributes a processor may turn out to read off its tokenizer before the build gives up."""
TEMPLATE = ("{% for message in messages %}{{ message['role'] }}: {% if message['content'] is string %}"
            "{{ message['content'] }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}"
            "IMAGE{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}</s>\n"
            "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")


class NotBuilt(Exception):
    """A model type that cannot be built offline here; the message says why."""


def image_text_to_text_types() -> list[str]:
    """Every model type of transformers' ``AutoModelForImageTextToText``, sorted."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def shrunk(settings: dict, vocab_size: int, width: int = TEXT_WIDTH) -> dict:
    """A config's ``to_dict()`` ``settings`` shrunk (module docstring), every sub-config too: one layer (a list of
    one entry per layer keeps its last), the text width ``width`` (a vision config's :data:`VISION_WIDTH`), heads
    of :data:`HEAD_DIM`, the vocabulary ``vocab_size``.

    >>> small = shrunk({"hidden_size": 4096, "num_hidden_layers": 4, "layer_types": ["a", "a", "a", "full"],
    ...                 "vision_config": {"hidden_size": 1024, "depth": 24, "out_hidden_size": 4096}}, 640)
    >>> small["hidden_size"], small["layer_types"], small["vision_config"]
    (64, ['full'], {'hidden_size': 32, 'depth': 1, 'out_hidden_size': 64})
    """
    layers = next((settings[key] for key in LAYER_COUNTS if isinstance(settings.get(key), int)), None)
    out = {}
    for key, value in settings.items():
        if isinstance(value, dict) and value and all(str(index).isdigit() for index in value):  # per layer
            value = {index: entry for index, entry in value.items() if int(index) < SHRUNK["num_hidden_layers"]}
        elif isinstance(value, dict) and key.endswith("config"):
            value = shrunk(value, vocab_size, VISION_WIDTH if "vision" in key or "visual" in key else width)
        elif isinstance(value, list) and layers and len(value) == layers and key not in FIRST_LAYER:
            value = value[-1:]
        elif isinstance(value, bool) or not isinstance(value, int | list | dict):
            pass
        elif key in SHRUNK:
            value = min(value, SHRUNK[key])
        elif key in WIDTHS:
            value = width
        elif key in INTERMEDIATES:
            value = 2 * width
        elif key in TEXT_WIDTHS:
            value = TEXT_WIDTH
        elif key == "vocab_size":
            value = vocab_size
        elif key == "head_dim":
            value = HEAD_DIM
        elif key in FIRST_LAYER:
            value = FIRST_LAYER[key]
        elif key == "vision_feature_layer":
            value = -1 if isinstance(value, int) else [-1]
        out[key] = value
    if isinstance(out.get("rope_parameters"), dict) and "mrope_section" in out["rope_parameters"]:
        out["rope_parameters"] = {**out["rope_parameters"], "mrope_section": mrope_sections(
            out["rope_parameters"]["mrope_section"], HEAD_DIM // 2)}
    return out


def mrope_sections(sections: list[int], pairs: int) -> list[int]:
    """``sections`` scaled to sum to ``pairs`` (the rotary pairs of a head), the last taking the rounding.

    >>> mrope_sections([16, 24, 24], 16), mrope_sections([24, 20, 20], 16)
    ([4, 6, 6], [6, 5, 5])
    """
    scaled = [max(1, section * pairs // sum(sections)) for section in sections[:-1]]
    return [*scaled, pairs - sum(scaled)]


def _processor_classes(model_type: str):
    import transformers
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES, processor_class_from_name
    from transformers.models.auto.video_processing_auto import VIDEO_PROCESSOR_MAPPING_NAMES

    if model_type not in PROCESSOR_MAPPING_NAMES:
        raise NotBuilt("no processor class (AutoProcessor has none for it)")
    processor = processor_class_from_name(PROCESSOR_MAPPING_NAMES[model_type])
    images = IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type)
    if not images:
        raise NotBuilt(f"no image processor class for its processor {processor.__name__}")
    image_name = images.get("pil") or images.get("torchvision") if isinstance(images, dict) else images[0]
    video_names = VIDEO_PROCESSOR_MAPPING_NAMES.get(model_type)
    video_name = (video_names.get("torchvision") or next(iter(video_names.values()))
                  if isinstance(video_names, dict) else video_names)
    return processor, getattr(transformers, image_name), getattr(transformers, video_name) if video_name else None


def _named_tokens(processor_class) -> dict[str, str]:
    """Every :data:`TOKEN_NAMES` attribute with a token string: the processor's own default where its constructor
    has one, else ``<|name|>``."""
    parameters = inspect.signature(processor_class.__init__).parameters
    return {name: parameters[name].default if name in parameters and isinstance(parameters[name].default, str)
            and parameters[name].default else f"<|{name.removesuffix('_token')}|>" for name in TOKEN_NAMES}


def _extra_parts(model_type: str, processor_class, tokenizer, config) -> dict[str, object]:
    """The keywords a processor takes besides its image processor and tokenizer: a feature extractor, a second
    tokenizer, and the vision tower's patch size and feature strategy where it reads them."""
    import transformers
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES

    parameters = inspect.signature(processor_class.__init__).parameters
    extra: dict[str, object] = {}
    if "feature_extractor" in parameters and FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type):
        extra["feature_extractor"] = getattr(transformers, FEATURE_EXTRACTOR_MAPPING_NAMES[model_type])()
    for name in parameters:
        if name.endswith("_tokenizer"):
            extra[name] = tokenizer
    vision = getattr(config, "vision_config", None)
    if "patch_size" in parameters and getattr(vision, "patch_size", None):
        extra["patch_size"] = vision.patch_size
    if "vision_feature_select_strategy" in parameters and getattr(config, "vision_feature_select_strategy", None):
        extra["vision_feature_select_strategy"] = config.vision_feature_select_strategy
        extra["num_additional_image_tokens"] = 1 if config.vision_feature_select_strategy == "default" else 0
    return extra


def _processor(model_type: str, processor_class, image_class, video_class, named: dict[str, str], config):
    from aerorl_ops.models.tiny_families import TinyFamily
    from aerorl_ops.models.tiny_family_build import train_family_tokenizer

    spec = TinyFamily(model_type, None, {**BASE_TOKENS, **named}, tuple(dict.fromkeys(
        [*BASE_TOKENS.values(), *named.values()])), ("", {}), {})
    tokenizer = train_family_tokenizer(spec)
    parts = {"image_processor": image_class(), "tokenizer": tokenizer}
    if video_class is not None and "video_processor" in inspect.signature(processor_class.__init__).parameters:
        parts["video_processor"] = video_class()
    try:
        return processor_class(**parts, **_extra_parts(model_type, processor_class, tokenizer, config))
    except AttributeError:
        raise
    except Exception as error:  # each processor checks its parts its own way
        raise NotBuilt(f"its processor {processor_class.__name__} does not build from stock parts: "
                       f"{type(error).__name__}: {str(error)[:160]}") from None


def shrunk_processor(model_type: str, config=None):
    """The model type's stock processor over a tiny tokenizer holding its tokens, with :data:`TEMPLATE`; ``config``
    (the model's) gives what the processor reads of the vision tower."""
    processor_class, image_class, video_class = _processor_classes(model_type)
    named = _named_tokens(processor_class)
    for _ in range(MISSING_TOKENS):
        try:
            processor = _processor(model_type, processor_class, image_class, video_class, named, config)
        except AttributeError as error:  # "TokenizersBackend has no attribute slice_start_token": name it too
            missing = str(error).rsplit(" ", 1)[-1]
            if not missing.endswith("_token") or missing in named:
                raise NotBuilt(f"its processor {processor_class.__name__} does not build from stock parts: "
                               f"AttributeError: {str(error)[:160]}") from None
            named[missing] = f"<|{missing.removesuffix('_token')}|>"
            continue
        image_token = getattr(processor, "image_token", None) or named["image_token"]
        if image_token in processor.tokenizer.get_vocab():
            break
        named["image_token"] = image_token  # a processor with an image token of its own: the tokenizer holds it
    else:
        raise NotBuilt(f"its processor {processor_class.__name__} reads more than {MISSING_TOKENS} tokens by name")
    processor.chat_template = TEMPLATE.replace("IMAGE", image_token)
    return processor, image_token


def shrunk_config(model_type: str, tokenizer=None, image_token: str = ""):
    """The model type's config from its defaults, :func:`shrunk`, with ``tokenizer``'s vocabulary and special
    token ids and its id of ``image_token`` as the image token id (a first pass without a tokenizer: what the
    processor reads of the vision tower)."""
    from transformers import AutoConfig

    try:
        settings = AutoConfig.for_model(model_type).to_dict()
    except Exception:  # a config class whose image token id has no default
        settings = AutoConfig.for_model(model_type, image_token_id=0, image_token_index=0).to_dict()
    vocab = -(-len(tokenizer) // 64) * 64 if tokenizer is not None else 640
    settings = shrunk({key: value for key, value in settings.items() if key not in ("model_type",
                                                                                   "transformers_version")}, vocab)
    image_id = tokenizer.convert_tokens_to_ids(image_token) if tokenizer is not None else 0
    for key in ("image_token_id", "image_token_index"):
        if key in settings or key in (settings.get("text_config") or {}):
            settings[key] = image_id
    if tokenizer is not None:
        text = settings.get("text_config") if isinstance(settings.get("text_config"), dict) else settings
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if key in text:
                text[key] = getattr(tokenizer, key)
    try:
        return AutoConfig.for_model(model_type, **settings)
    except Exception as error:  # a config class validates its sizes against each other
        raise NotBuilt(f"its shrunk config is refused: {type(error).__name__}: "
                       f"{' '.join(str(error).split())[:160]}") from None


def build_shrunk_family(model_type: str, output_dir: Path, seed: int = 0) -> Path:
    """Write ``model_type``'s shrunk tiny checkpoint into ``output_dir`` and return it; :class:`NotBuilt` saying
    why when it cannot be built (module docstring)."""
    from aerorl_ops.models.tiny_family_build import random_init_model, save_greedy_checkpoint

    processor, image_token = shrunk_processor(model_type, shrunk_config(model_type))
    tokenizer = processor.tokenizer
    config = shrunk_config(model_type, tokenizer, image_token)
    try:
        model = random_init_model(config, seed)
    except Exception as error:  # a shrunk config whose sizes disagree fails in the model's constructor
        raise NotBuilt(f"its shrunk config does not build a model: {type(error).__name__}: "
                       f"{' '.join(str(error).split())[:160]}") from None
    if getattr(model, "generation_config", None) is None:
        raise NotBuilt(f"{type(model).__name__} has no generation config: it does not generate text")
    output_dir = save_greedy_checkpoint(model, processor, tokenizer, output_dir)
    (output_dir / "chat_template.jinja").write_text(processor.chat_template)
    return output_dir
