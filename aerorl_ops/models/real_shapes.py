"""Random-init checkpoints at published model sizes, built where they will run, with no hub.

Each shape is a family of ``tiny_families`` with its real configuration (vocabulary, widths, depths, heads,
vision tower: the public values below) in place of the tiny one: the family's processor and chat template, a
small byte-level BPE tokenizer with the family's special tokens (the embedding and LM head keep the real
vocabulary size), and seeded random weights made directly on ``device`` in ``dtype`` (bf16 on a GPU: no fp32
copy, no host round trip but the save). The folder loads like a hub checkpoint: ``[models.<key>] source =
"<folder>"`` for ``aerorl bench``, ``train`` and ``eval``.

``layers`` overrides the decoder's (and the vision tower's) depth: the same builder at two layers is a CPU test.

    python -m aerorl_ops.models.real_shapes qwen2.5-vl-3b data/models/qwen2.5-vl-3b --device cuda
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from pathlib import Path

import torch

from aerorl_ops.models.tiny_families import FAMILIES, Token
from aerorl_ops.models.tiny_family_build import (
    family_config,
    family_processor,
    random_init_model,
    save_greedy_checkpoint,
    train_family_tokenizer,
)

_MROPE_128 = {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [16, 24, 24]}  # head_dim 128
_QWEN_PIXELS = dict(min_pixels=56 * 56, max_pixels=28 * 28 * 1280)  # Qwen2-VL's preprocessor_config.json
_QWEN_TOKENS = {k: v for k, v in FAMILIES["qwen2-vl"].config.items() if k.endswith("token_id")}
_QWEN25_TOKENS = {k: v for k, v in FAMILIES["qwen2.5-vl"].config.items() if k.endswith("token_id")}


def _qwen_text(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, max_positions: int,
               vocab: int = 151_936) -> dict:
    return dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=max_positions,
                rms_norm_eps=1e-6, rope_parameters=_MROPE_128)


def _qwen25_vision(out_hidden: int) -> dict:
    return dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=out_hidden,
                fullatt_block_indexes=[7, 15, 23, 31], window_size=112, patch_size=14, spatial_merge_size=2,
                tokens_per_second=2)


@dataclasses.dataclass(frozen=True)
class RealShape:
    """A published model's shape: its tiny family, config keywords, image processor and processor keywords."""

    family: str
    config: dict
    image_processor: tuple[str, dict]
    processor: dict = dataclasses.field(default_factory=dict)


REAL_SHAPES = {
    "smolvlm-500m": RealShape("smolvlm", dict(  # SmolVLM-500M-Instruct (Idefics3): SmolLM2-360M + SigLIP b/16-512
        image_token_id=Token("<image>"), scale_factor=4, tie_word_embeddings=False,
        text_config=dict(vocab_size=49_280, hidden_size=960, intermediate_size=2560, num_hidden_layers=32,
                         num_attention_heads=15, num_key_value_heads=5, max_position_embeddings=8192,
                         rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 100_000.0},
                         pad_token_id=Token("<|end_of_text|>")),
        vision_config=dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                           image_size=512, patch_size=16)),
        ("Idefics3ImageProcessorPil", dict(do_image_splitting=False, size={"longest_edge": 512},
                                           max_image_size={"longest_edge": 512})),
        dict(image_seq_len=64)),
    "qwen2-vl-2b": RealShape("qwen2-vl", dict(  # Qwen2-VL-2B-Instruct
        text_config=_qwen_text(1536, 8960, 28, 12, 2, 32_768), tie_word_embeddings=True,
        vision_config=dict(depth=32, embed_dim=1280, hidden_size=1536, num_heads=16, mlp_ratio=4, patch_size=14,
                           spatial_merge_size=2), **_QWEN_TOKENS),
        ("Qwen2VLImageProcessorPil", _QWEN_PIXELS)),
    "qwen2.5-vl-3b": RealShape("qwen2.5-vl", dict(  # Qwen2.5-VL-3B-Instruct
        text_config=_qwen_text(2048, 11008, 36, 16, 2, 128_000), tie_word_embeddings=True,
        vision_config=_qwen25_vision(2048), **_QWEN25_TOKENS),
        ("Qwen2VLImageProcessorPil", _QWEN_PIXELS)),
    "qwen2.5-vl-7b": RealShape("qwen2.5-vl", dict(  # Qwen2.5-VL-7B-Instruct
        text_config=_qwen_text(3584, 18944, 28, 28, 4, 128_000, vocab=152_064), tie_word_embeddings=False,
        vision_config=_qwen25_vision(3584), **_QWEN25_TOKENS),
        ("Qwen2VLImageProcessorPil", _QWEN_PIXELS)),
}
DEPTH_KEYS = {"text_config": ("num_hidden_layers",), "vision_config": ("depth", "num_hidden_layers")}


def shape_config(name: str, layers: int | None = None) -> dict:
    """Shape ``name``'s config keywords, its decoder and vision tower cut to ``layers`` layers when given."""
    if name not in REAL_SHAPES:
        raise ValueError(f"no real shape {name!r}; known: {', '.join(sorted(REAL_SHAPES))}")
    config = copy.deepcopy(REAL_SHAPES[name].config)
    if layers is not None:
        for part, keys in DEPTH_KEYS.items():
            for key in keys:
                if key in config[part]:
                    config[part][key] = layers
        if "fullatt_block_indexes" in config["vision_config"]:
            config["vision_config"]["fullatt_block_indexes"] = [layers - 1]
    return config


def build_real_shape(name: str, folder: Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.bfloat16,
                     layers: int | None = None, seed: int = 0) -> Path:
    """Write a random-init checkpoint of shape ``name`` into ``folder`` (module docstring) and return it."""
    config_keywords = shape_config(name, layers)  # names the known shapes when ``name`` is not one
    shape = REAL_SHAPES[name]
    spec = dataclasses.replace(FAMILIES[shape.family], config=config_keywords,
                               image_processor=shape.image_processor, processor=shape.processor)
    tokenizer = train_family_tokenizer(spec)
    config = family_config(spec, tokenizer)
    config.dtype = dtype  # from_config makes the weights in this dtype
    with torch.device(device):
        model = random_init_model(config, seed)
    return save_greedy_checkpoint(model, family_processor(spec, tokenizer), tokenizer, folder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build a random-init checkpoint of a published VLM size.")
    parser.add_argument("shape", choices=sorted(REAL_SHAPES))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--layers", type=int, default=None, help="decoder and vision depth (a quick test)")
    args = parser.parse_args(argv)
    build_real_shape(args.shape, args.folder, args.device, getattr(torch, args.dtype), args.layers)
    print(args.folder)


if __name__ == "__main__":
    main()
