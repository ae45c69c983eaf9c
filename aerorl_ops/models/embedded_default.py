"""Build the embedded default: a tiny Qwen2-VL that runs anywhere.

Random weights, a byte-level BPE tokenizer trained locally with the Qwen special tokens, the
real Qwen2-VL chat template and processor (its image and video processors). It is saved with
``save_pretrained`` and then loaded through exactly the ``from_pretrained`` path a real checkpoint
takes, so every stage of the pipeline (processor, chat template, batched ``generate``, losses,
quantized reference) is exercised without a GPU or a model hub.

Every dimension is a multiple of 64 (bitsandbytes nf4 on AVX512-BF16 CPUs needs in/out features
that are multiples of 64 and 32). The build is deterministic: the same settings give the same
files, byte for byte.

Two choices make the model able to learn short-answer VQA (easy-VQA) on a CPU:
- ``min_pixels = 112 * 112``: a 64x64 image is resized to 112x112, i.e. 8x8 patches of 14 px,
  merged 2x2 into **16 vision tokens** (at 56*56 it was 4, and the model never used the image);
- the tokenizer corpus holds the answer words, so each easy-VQA answer is one token (+ EOS).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from aerorl_ops.models.chat_template import QWEN2_VL_CHAT_TEMPLATE, QWEN_SPECIAL_TOKENS
from aerorl_ops.models.tokenizer_corpus import tokenizer_training_corpus
from aerorl_ops.models.video_geometry import matching_video_processor

BUILD_MARKER = "aerorl_embedded.json"
BUILD_VERSION = 4  # bump when the build changes without a spec change (tokenizer corpus, init)


@dataclass(frozen=True)
class TinyQwen2VLSpec:
    """Sizes of the embedded model. Defaults give 930,560 parameters and 16 vision tokens per 64x64 image."""

    seed: int = 0
    bpe_vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vision_embed_dim: int = 64
    vision_depth: int = 2
    vision_heads: int = 2
    min_pixels: int = 112 * 112
    max_pixels: int = 320 * 320

    def __post_init__(self) -> None:
        for name in ("hidden_size", "intermediate_size", "vision_embed_dim"):
            if getattr(self, name) % 64:
                raise ValueError(f"TinyQwen2VLSpec.{name}={getattr(self, name)} must be a multiple of 64")


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def train_tokenizer(spec: TinyQwen2VLSpec) -> PreTrainedTokenizerFast:
    """Byte-level BPE with the Qwen special tokens, left padding and ``<|im_end|>`` as EOS."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.bpe_vocab_size,
        special_tokens=list(QWEN_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(tokenizer_training_corpus(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        padding_side="left",
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"},
    )


def build_config(spec: TinyQwen2VLSpec, tokenizer: PreTrainedTokenizerFast) -> Qwen2VLConfig:
    """A Qwen2-VL config whose special-token ids are the tokenizer's own."""
    token_id = tokenizer.convert_tokens_to_ids
    head_dim = spec.hidden_size // spec.num_attention_heads
    unit = head_dim // 16  # mrope splits the head_dim/2 rotary pairs 2:3:3 over (time, height, width)
    special = {
        "bos_token_id": token_id("<|endoftext|>"),
        "eos_token_id": token_id("<|im_end|>"),
        "pad_token_id": token_id("<|endoftext|>"),
    }
    return Qwen2VLConfig(
        text_config=dict(
            vocab_size=_round_up(len(tokenizer), 64),
            hidden_size=spec.hidden_size,
            intermediate_size=spec.intermediate_size,
            num_hidden_layers=spec.num_layers,
            num_attention_heads=spec.num_attention_heads,
            num_key_value_heads=spec.num_key_value_heads,
            max_position_embeddings=32768,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "mrope_section": [unit * 2, unit * 3, unit * 3]},
            tie_word_embeddings=False,
            **special,
        ),
        vision_config=dict(
            depth=spec.vision_depth,
            embed_dim=spec.vision_embed_dim,
            hidden_size=spec.hidden_size,
            num_heads=spec.vision_heads,
            mlp_ratio=4,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
        ),
        image_token_id=token_id("<|image_pad|>"),
        video_token_id=token_id("<|video_pad|>"),
        vision_start_token_id=token_id("<|vision_start|>"),
        vision_end_token_id=token_id("<|vision_end|>"),
        tie_word_embeddings=False,
        **special,
    )


def build_tiny_qwen2vl(output_dir: Path, spec: TinyQwen2VLSpec = TinyQwen2VLSpec()) -> Path:
    """Build the embedded model into ``output_dir`` (created) and return the directory.

    Rebuilding with the same spec is skipped when ``output_dir`` already holds that build. The
    build is written to a temporary sibling folder and renamed into place, so concurrent
    processes never load a half-written model.
    """
    output_dir = Path(output_dir)
    if _is_built(output_dir, spec):
        return output_dir
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=_ensure_parent(output_dir)))
    try:
        _write_model(staging, spec)
        if output_dir.exists():  # an older spec, or a build that lost a race: replace it
            shutil.rmtree(output_dir, ignore_errors=True)
        os.replace(staging, output_dir)
    except OSError:
        if not _is_built(output_dir, spec):
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output_dir


def _ensure_parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.parent


def _build_record(spec: TinyQwen2VLSpec) -> dict[str, object]:
    """What the build marker holds: the spec, and the build version (an older build is rebuilt)."""
    return {**asdict(spec), "build_version": BUILD_VERSION}


def _is_built(output_dir: Path, spec: TinyQwen2VLSpec) -> bool:
    return holds_build(output_dir, _build_record(spec))


def holds_build(folder: Path, record: Mapping[str, object]) -> bool:
    """Whether ``folder``'s build marker holds ``record`` (what an embedded build was made from)."""
    marker = Path(folder) / BUILD_MARKER
    return marker.exists() and json.loads(marker.read_text()) == record


def write_build_marker(folder: Path, record: Mapping[str, object]) -> None:
    """Mark ``folder`` as built from ``record`` (written last, so a marked folder is whole)."""
    (Path(folder) / BUILD_MARKER).write_text(json.dumps(record, indent=2, sort_keys=True))


def _write_model(output_dir: Path, spec: TinyQwen2VLSpec) -> None:
    tokenizer = train_tokenizer(spec)
    image_processor = Qwen2VLImageProcessorPil(min_pixels=spec.min_pixels, max_pixels=spec.max_pixels)
    processor = Qwen2VLProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=QWEN2_VL_CHAT_TEMPLATE,
        video_processor=matching_video_processor("Qwen2VLVideoProcessor", image_processor),
    )
    config = build_config(spec, tokenizer)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(spec.seed)
    model = Qwen2VLForConditionalGeneration(config)
    torch.random.set_rng_state(generator_state)
    model.generation_config.do_sample = False
    model.generation_config.eos_token_id = config.text_config.eos_token_id
    model.generation_config.pad_token_id = config.text_config.pad_token_id

    model.save_pretrained(output_dir)
    processor.save_pretrained(output_dir)
    write_build_marker(output_dir, _build_record(spec))
