"""Building a tiny random-init checkpoint of a family in ``tiny_families``' table: its tokenizer (byte-level
BPE on the embedded default's corpus, with the family's special tokens), config, seeded random weights,
processor and chat template, saved in a hub checkpoint's layout (``build_tiny_family``)."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForImageTextToText, PreTrainedModel, PreTrainedTokenizerFast
from transformers import __version__ as transformers_version
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES, processor_class_from_name

from aerorl_ops.models.tiny_families import BPE_VOCAB_SIZE, TinyFamily, Token, family
from aerorl_ops.models.tokenizer_corpus import tokenizer_training_corpus
from aerorl_ops.models.video_geometry import matching_video_processor


def train_family_tokenizer(spec: TinyFamily) -> PreTrainedTokenizerFast:
    """Byte-level BPE on the embedded default's corpus, with the family's special and named tokens."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB_SIZE, special_tokens=list(spec.special_tokens),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(tokenizer_training_corpus(), trainer)
    standard = {key: value for key, value in spec.tokens.items() if key in ("bos_token", "eos_token", "pad_token")}
    extra = {key: value for key, value in spec.tokens.items() if key not in standard}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, model_max_length=4096, padding_side="left",
                                        extra_special_tokens=extra, **standard)
    tokenizer.add_tokens(list(spec.added_tokens))
    return tokenizer


def resolve_tokens(value, tokenizer):
    """``value`` with every ``Token`` replaced by its id in ``tokenizer`` (through dicts and lists)."""
    if isinstance(value, Token):
        token_id = tokenizer.convert_tokens_to_ids(value.text)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise ValueError(f"token {value.text!r} is not in the tokenizer; add it to the family's special_tokens")
        return token_id
    if isinstance(value, dict):
        return {key: resolve_tokens(item, tokenizer) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_tokens(item, tokenizer) for item in value]
    return value


def family_config(spec: TinyFamily, tokenizer: PreTrainedTokenizerFast):
    """The family's config, its token ids the tokenizer's, its vocabulary the tokenizer's (rounded up to 64)."""
    kwargs = resolve_tokens(spec.config, tokenizer)
    text = kwargs.setdefault("text_config", {})
    text.setdefault("vocab_size", -(-len(tokenizer) // 64) * 64)
    special = {name: resolve_tokens(Token(spec.tokens[key]), tokenizer)
               for name, key in (("eos_token_id", "eos_token"), ("pad_token_id", "pad_token"),
                                 ("bos_token_id", "bos_token")) if key in spec.tokens}
    special.setdefault("bos_token_id", special.get("pad_token_id"))
    for name, token_id in special.items():
        text.setdefault(name, token_id)
    return AutoConfig.for_model(spec.model_type, **kwargs)


def random_init_model(config, seed: int = 0) -> PreTrainedModel:
    """``AutoModelForImageTextToText`` of ``config``, weights drawn from ``seed`` (the caller's RNG left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(config)
        with torch.no_grad():
            for parameter in model.parameters():
                if shut_at_init(parameter):
                    parameter.normal_(0.0, 0.02)
        return model


def shut_at_init(parameter: torch.Tensor) -> bool:
    """A weight matrix or a scalar gate that transformers initializes to zero: Gemma 3's image projection
    (images would reach the language model as zeros), Llama 3.2 Vision's cross-attention gates (no image at
    all). Zero vectors (biases) are left as they are."""
    return (parameter.ndim >= 2 or parameter.numel() == 1) and not parameter.any()


def family_processor(spec: TinyFamily, tokenizer: PreTrainedTokenizerFast):
    """The family's stock processor, with its video processor (of the image processor's geometry,
    ``video_geometry``) and audio feature extractor where it has them."""
    import transformers

    class_name, image_kwargs = spec.image_processor
    parts = {"image_processor": getattr(transformers, class_name)(**image_kwargs), "tokenizer": tokenizer}
    if spec.video_processor is not None:
        video_name, video_kwargs = spec.video_processor
        parts["video_processor"] = matching_video_processor(video_name, parts["image_processor"], **video_kwargs)
    if spec.feature_extractor is not None:
        extractor_name, extractor_kwargs = spec.feature_extractor
        parts["feature_extractor"] = getattr(transformers, extractor_name)(**extractor_kwargs)
    stock = processor_class_from_name(PROCESSOR_MAPPING_NAMES[spec.model_type])
    return stock(**parts, chat_template=spec.chat_template, **spec.processor)


def build_tiny_family(name: str, output_dir: Path, seed: int = 0) -> Path:
    """Write family ``name``'s tiny checkpoint into ``output_dir`` (created) and return it. ``ImportError``
    naming what is missing where the installed transformers has no such model, or where the family's
    processor or tower needs a package that is not installed (torchvision, timm, num2words)."""
    spec = family(name)
    if spec.model_type not in CONFIG_MAPPING_NAMES:
        raise ImportError(f"the installed transformers ({transformers_version}) has no {spec.model_type!r} model, "
                          f"which family {name!r} is")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_family_tokenizer(spec)
    processor = family_processor(spec, tokenizer)
    config = family_config(spec, tokenizer)
    model = random_init_model(config, seed)
    save_greedy_checkpoint(model, processor, tokenizer, output_dir)
    rename_saved_weights(output_dir / "model.safetensors", spec.checkpoint_renames)
    return output_dir


def save_greedy_checkpoint(model, processor, tokenizer, folder: Path) -> Path:
    """Save ``model``, greedy by default with ``tokenizer``'s end and padding tokens, and ``processor`` into
    ``folder`` (created): a built checkpoint as ``from_pretrained`` reads it."""
    model.generation_config.do_sample = False
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def rename_saved_weights(path: Path, renames: tuple[tuple[str, str], ...]) -> None:
    """Rename the weights in the safetensors file at ``path`` whose names start with a ``renames`` prefix
    (and not already with its replacement), so the file has the family's hub checkpoint names."""
    if not renames:
        return
    from safetensors.torch import load_file, save_file

    weights = load_file(path)
    renamed = {}
    for name, tensor in weights.items():
        for old, new in renames:
            if name.startswith(old) and not name.startswith(new):
                name = new + name.removeprefix(old)
        renamed[name] = tensor
    save_file(renamed, path, metadata={"format": "pt"})
