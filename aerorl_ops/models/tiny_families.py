"""Tiny random-init checkpoints of every VLM family, built locally from transformers' own classes.

``tiny_family_build.build_tiny_family(name, output_dir)`` writes a folder in a hub checkpoint's layout (config.json,
safetensors, tokenizer files, processor config, chat template, generation config) that loads
through exactly the path a real checkpoint of that family takes. The tokenizer is the embedded
default's approach (byte-level BPE trained on a fixed corpus) with the family's special tokens,
its processor is the family's stock class (with its video processor where it has one) and its chat
template the family's (``family_chat_templates``; none for PaliGemma, as its stock checkpoints). Models
are tiny (hidden 64, one layer, Llama 3.2 Vision's two with the second a cross-attention layer; one-layer
vision towers, small images) and seeded, so a build takes seconds and is the same every time. ``FAMILIES``
is the table: family -> tokens, processor and config keywords, where a ``Token`` stands for that token's
id in the built tokenizer. A family whose processor or tower needs a package that is not installed
(PerceptionLM's tower: timm) cannot be built, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aerorl_ops.models import family_chat_templates as templates
from aerorl_ops.models.chat_template import QWEN2_VL_CHAT_TEMPLATE, QWEN_SPECIAL_TOKENS

BPE_VOCAB_SIZE = 512
HIDDEN = 64


@dataclass(frozen=True)
class Token:
    """A config value that is the id of ``text`` in the family's tokenizer."""

    text: str


@dataclass(frozen=True)
class TinyFamily:
    """How to build one family's tiny checkpoint.

    ``tokens``: the tokenizer's named tokens (eos_token, pad_token, bos_token, and attributes the
    processor reads such as image_token); ``special_tokens``: every special token of the vocabulary;
    ``image_processor``: the image processor's class name and keywords; ``processor``: the processor's
    keywords besides its sub-processors; ``config``: keywords of the family's config class.
    """

    model_type: str
    chat_template: str | None  # None: the family's stock checkpoints ship none (PaliGemma)
    tokens: dict[str, str]
    special_tokens: tuple[str, ...]
    image_processor: tuple[str, dict]
    config: dict
    processor: dict = field(default_factory=dict)
    added_tokens: tuple[str, ...] = ()
    """Non-special tokens of the family's vocabulary that tools look up by their text (Gemma's newline runs)."""
    checkpoint_renames: tuple[tuple[str, str], ...] = ()
    """(prefix transformers saves, the hub checkpoints' prefix) for weights saved under other names."""
    video_processor: tuple[str, dict] | None = None
    """For a family whose processor has a video processor: its class name and keywords on top of the image
    processor's geometry (``video_geometry.matching_video_processor``)."""
    feature_extractor: tuple[str, dict] | None = None
    """For a family whose processor has an audio feature extractor (Gemma 4): its class name and keywords."""


def _text(**overrides) -> dict:
    """A one-layer decoder of width ``HIDDEN`` (``overrides`` replace or add keywords)."""
    return {**dict(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=4096), **overrides}


def _siglip(image_size: int, patch_size: int, **overrides) -> dict:
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                image_size=image_size, patch_size=patch_size, **overrides)


_QWEN_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "image_token": "<|image_pad|>",
                "video_token": "<|video_pad|>"}
_QWEN_IDS = dict(image_token_id=Token("<|image_pad|>"), video_token_id=Token("<|video_pad|>"),
                 vision_start_token_id=Token("<|vision_start|>"), vision_end_token_id=Token("<|vision_end|>"))
_QWEN_IMAGES = ("Qwen2VLImageProcessorPil", dict(min_pixels=56 * 56, max_pixels=112 * 112))
_MROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]}  # head_dim 32: 16 pairs
_IDEFICS_TOKENS = ("<|begin_of_text|>", "<|end_of_text|>", "<end_of_utterance>", "<fake_token_around_image>",
                   "<image>", "<global-img>")
_IDEFICS_IMAGES = dict(do_image_splitting=False, size={"longest_edge": 64}, max_image_size={"longest_edge": 64})
_IDEFICS = dict(image_token_id=Token("<image>"), scale_factor=2,
                vision_config=_siglip(64, 16), text_config=_text(pad_token_id=Token("<|end_of_text|>")))
_SIGLIP_TOWER = (("vision_tower.", "vision_tower.vision_model."),)  # hub SigLIP towers keep ``vision_model``
_CHATML = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_CLIP = dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
             num_attention_heads=2, image_size=32, patch_size=16, projection_dim=32)
_PINPOINTS = [[32, 32], [32, 64], [64, 32], [64, 64]]
_LLAMA4_TOKENS = ("<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad|>", "<|header_start|>",
                  "<|header_end|>", "<|eot|>", "<|image_start|>", "<|image_end|>", "<|image|>", "<|patch|>",
                  "<|tile_x_separator|>", "<|tile_y_separator|>")

FAMILIES: dict[str, TinyFamily] = {
    "qwen2-vl": TinyFamily(
        "qwen2_vl", QWEN2_VL_CHAT_TEMPLATE, _QWEN_TOKENS, QWEN_SPECIAL_TOKENS, _QWEN_IMAGES,
        dict(text_config=_text(rope_parameters=_MROPE), vision_config=dict(
            depth=1, embed_dim=32, hidden_size=HIDDEN, num_heads=2, mlp_ratio=2, patch_size=14), **_QWEN_IDS),
        video_processor=("Qwen2VLVideoProcessor", {})),
    "qwen2.5-vl": TinyFamily(
        "qwen2_5_vl", QWEN2_VL_CHAT_TEMPLATE, _QWEN_TOKENS, QWEN_SPECIAL_TOKENS, _QWEN_IMAGES,
        dict(text_config=_text(rope_parameters=_MROPE), vision_config=dict(
            depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN,
            fullatt_block_indexes=[0], window_size=56, patch_size=14), **_QWEN_IDS),
        video_processor=("Qwen2VLVideoProcessor", {})),
    "qwen3-vl": TinyFamily(
        "qwen3_vl", templates.QWEN3_VL_CHAT_TEMPLATE, _QWEN_TOKENS, QWEN_SPECIAL_TOKENS,
        ("Qwen2VLImageProcessorPil", dict(patch_size=16, min_pixels=64 * 64, max_pixels=128 * 128)),
        dict(text_config=_text(head_dim=32, rope_parameters={
            "rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 4, 4], "mrope_interleaved": True}),
            vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN,
                               patch_size=16, num_position_embeddings=16, deepstack_visual_indexes=[0]),
            **_QWEN_IDS),
        video_processor=("Qwen3VLVideoProcessor", {})),
    "smolvlm": TinyFamily(  # SmolVLM(-256M/-500M/-Instruct) checkpoints are Idefics3
        "idefics3", templates.IDEFICS3_CHAT_TEMPLATE,
        {"bos_token": "<|begin_of_text|>", "eos_token": "<end_of_utterance>", "pad_token": "<|end_of_text|>"},
        _IDEFICS_TOKENS, ("Idefics3ImageProcessorPil", _IDEFICS_IMAGES), _IDEFICS, dict(image_seq_len=4)),
    "smolvlm2": TinyFamily(
        "smolvlm", templates.IDEFICS3_CHAT_TEMPLATE,
        {"bos_token": "<|begin_of_text|>", "eos_token": "<end_of_utterance>", "pad_token": "<|end_of_text|>",
         "image_token": "<image>", "fake_image_token": "<fake_token_around_image>",
         "global_image_token": "<global-img>", "end_of_utterance_token": "<end_of_utterance>"},
        _IDEFICS_TOKENS, ("SmolVLMImageProcessorPil", _IDEFICS_IMAGES), _IDEFICS, dict(image_seq_len=4),
        video_processor=("SmolVLMVideoProcessor", {})),
    "gemma3": TinyFamily(
        "gemma3", templates.GEMMA3_CHAT_TEMPLATE,
        {"bos_token": "<bos>", "eos_token": "<end_of_turn>", "pad_token": "<pad>", "boi_token": "<start_of_image>",
         "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"},
        ("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
         "<image_soft_token>"),
        ("Gemma3ImageProcessorPil", dict(size={"height": 64, "width": 64})),
        dict(text_config=_text(head_dim=32, query_pre_attn_scalar=32, sliding_window=64,
                               pad_token_id=Token("<pad>"), bos_token_id=Token("<bos>"),
                               eos_token_id=Token("<end_of_turn>")),
             vision_config=_siglip(64, 16, vision_use_head=False), mm_tokens_per_image=4,
             boi_token_index=Token("<start_of_image>"), eoi_token_index=Token("<end_of_image>"),
             image_token_index=Token("<image_soft_token>")),
        dict(image_seq_length=4), added_tokens=("\n", "\n\n", "\n\n\n", "\n\n\n\n"),
        checkpoint_renames=_SIGLIP_TOWER),
    "llava-onevision": TinyFamily(
        "llava_onevision", templates.LLAVA_ONEVISION_CHAT_TEMPLATE,
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "image_token": "<image>", "video_token": "<video>"},
        _CHATML + ("<image>", "<video>"),
        ("LlavaOnevisionImageProcessorPil", dict(size={"height": 32, "width": 32}, crop_size=None,
                                                 image_grid_pinpoints=[[32, 32], [32, 64], [64, 32], [64, 64]])),
        dict(text_config=dict(_text(), model_type="qwen2"),
             vision_config=_siglip(32, 16, model_type="siglip_vision_model"),
             image_token_index=Token("<image>"), video_token_index=Token("<video>"),
             image_grid_pinpoints=[[32, 32], [32, 64], [64, 32], [64, 64]], vision_feature_layer=-1,
             vision_feature_select_strategy="full"),
        dict(num_image_tokens=4, vision_feature_select_strategy="full"),
        video_processor=("LlavaOnevisionVideoProcessor", {}), checkpoint_renames=_SIGLIP_TOWER),
    "internvl": TinyFamily(
        "internvl", templates.INTERNVL_CHAT_TEMPLATE,
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "start_image_token": "<img>",
         "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"},
        _CHATML + ("<img>", "</img>", "<IMG_CONTEXT>", "<video>"),
        ("GotOcr2ImageProcessorPil", dict(size={"height": 32, "width": 32}, crop_to_patches=False)),
        dict(text_config=dict(_text(), model_type="qwen2"), vision_config=dict(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=[32, 32],
            patch_size=[8, 8]), image_token_id=Token("<IMG_CONTEXT>"), image_seq_length=4, downsample_ratio=0.5),
        dict(image_seq_length=4),
        video_processor=("InternVLVideoProcessor", {})),
    "qwen3-vl-moe": TinyFamily(
        "qwen3_vl_moe", templates.QWEN3_VL_CHAT_TEMPLATE, _QWEN_TOKENS, QWEN_SPECIAL_TOKENS,
        ("Qwen2VLImageProcessorPil", dict(patch_size=16, min_pixels=64 * 64, max_pixels=128 * 128)),
        dict(text_config=_text(head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "mrope_section": [8, 4, 4], "mrope_interleaved": True}),
             vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN,
                                patch_size=16, num_position_embeddings=16, deepstack_visual_indexes=[0]),
             **_QWEN_IDS),
        video_processor=("Qwen3VLVideoProcessor", {})),
    "paligemma": TinyFamily(  # stock PaliGemma checkpoints ship no chat template
        "paligemma", None,
        {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "image_token": "<image>"},
        ("<pad>", "<eos>", "<bos>", "<image>"),
        ("SiglipImageProcessorPil", dict(size={"height": 32, "width": 32}, image_seq_length=4)),
        dict(text_config=dict(_text(head_dim=32), model_type="gemma"), vision_config=_siglip(32, 16),
             projection_dim=HIDDEN, hidden_size=HIDDEN, image_token_index=Token("<image>")),
        checkpoint_renames=_SIGLIP_TOWER),
    "mllama": TinyFamily(  # Llama 3.2 Vision: images reach the decoder through cross-attention layers
        "mllama", templates.LLAMA3_VISION_CHAT_TEMPLATE,
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|finetune_right_pad_id|>",
         "image_token": "<|image|>"},
        ("<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>", "<|start_header_id|>",
         "<|end_header_id|>", "<|eot_id|>", "<|image|>"),
        ("MllamaImageProcessorPil", dict(size={"height": 32, "width": 32}, max_image_tiles=2)),
        dict(text_config=_text(num_hidden_layers=2, cross_attention_layers=[1]),
             vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_global_layers=1,
                                attention_heads=2, image_size=32, patch_size=16, max_num_tiles=2,
                                supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]],
                                intermediate_layers_indices=[0], vision_output_dim=64),
             image_token_index=Token("<|image|>"))),
    "aya-vision": TinyFamily(
        "aya_vision", templates.AYA_VISION_CHAT_TEMPLATE,
        {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>", "pad_token": "<PAD>",
         "image_token": "<image>"},
        ("<PAD>", "<BOS_TOKEN>", "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
         "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>", "<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>",
         "<|IMG_LINE_BREAK|>", "TILE", "TILE_GLOBAL"),
        ("GotOcr2ImageProcessorPil", dict(size={"height": 32, "width": 32}, crop_to_patches=True, max_patches=2)),
        dict(text_config=dict(_text(head_dim=32, sliding_window=64), model_type="cohere2"),
             vision_config=_siglip(32, 8, model_type="siglip_vision_model"), downsample_factor=2,
             image_token_index=Token("<|IMG_PATCH|>")),
        dict(patch_size=8, img_size=32, downsample_factor=2)),  # patch_size: the tower's (8 px)
    "idefics2": TinyFamily(
        "idefics2", templates.IDEFICS2_CHAT_TEMPLATE,
        {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<unk>"},
        ("<unk>", "<s>", "</s>", "<fake_token_around_image>", "<image>", "<end_of_utterance>"),
        ("Idefics2ImageProcessorPil", dict(do_image_splitting=False,
                                           size={"longest_edge": 32, "shortest_edge": 32})),
        dict(text_config=dict(_text(), model_type="mistral"), image_token_id=Token("<image>"),
             vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=32, patch_size=16),
             perceiver_config=dict(hidden_size=HIDDEN, rms_norm_eps=1e-6, resampler_n_latents=4, resampler_depth=1,
                                   resampler_n_heads=2, resampler_head_dim=16, num_key_value_heads=1)),
        dict(image_seq_len=4)),
    "llava": TinyFamily(  # LLaVA-1.5
        "llava", templates.LLAVA_CHAT_TEMPLATE,
        {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "image_token": "<image>"},
        ("<pad>", "<s>", "</s>", "<image>"),
        ("LlavaImageProcessorPil", dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})),
        dict(text_config=dict(_text(), model_type="llama"), vision_config=_CLIP, image_token_index=Token("<image>"),
             vision_feature_layer=-1, image_seq_length=4),
        dict(patch_size=16, vision_feature_select_strategy="default", num_additional_image_tokens=1)),
    "llava-next": TinyFamily(
        "llava_next", templates.LLAVA_NEXT_CHAT_TEMPLATE,
        {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "image_token": "<image>"},
        ("<pad>", "<s>", "</s>", "<image>"),
        ("LlavaNextImageProcessorPil", dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32},
                                            image_grid_pinpoints=_PINPOINTS)),
        dict(text_config=dict(_text(), model_type="mistral"), vision_config=_CLIP, image_token_index=Token("<image>"),
             image_grid_pinpoints=_PINPOINTS, vision_feature_layer=-1, image_seq_length=4),
        dict(patch_size=16, vision_feature_select_strategy="default", num_additional_image_tokens=1)),
    "glm4.1v": TinyFamily(
        "glm4v", templates.GLM4V_CHAT_TEMPLATE,
        {"eos_token": "<|user|>", "pad_token": "<|endoftext|>", "image_token": "<|image|>", "video_token": "<|video|>"},
        ("<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|begin_of_image|>",
         "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|image|>", "<|video|>"),
        ("Glm4vImageProcessorPil", dict(size={"shortest_edge": 56 * 56, "longest_edge": 112 * 112})),
        dict(text_config=_text(rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "mrope_section": [2, 3, 3], "partial_rotary_factor": 0.5}),
             vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN,
                                image_size=56, patch_size=14),
             image_token_id=Token("<|image|>"), video_token_id=Token("<|video|>"),
             image_start_token_id=Token("<|begin_of_image|>"), image_end_token_id=Token("<|end_of_image|>"),
             video_start_token_id=Token("<|begin_of_video|>"), video_end_token_id=Token("<|end_of_video|>")),
        video_processor=("Glm4vVideoProcessor", {})),
    "qwen3.5": TinyFamily(  # Qwen3.5: Qwen3-VL's processor, a decoder of gated-delta-net and attention layers
        "qwen3_5", templates.QWEN3_VL_CHAT_TEMPLATE, _QWEN_TOKENS, QWEN_SPECIAL_TOKENS,
        ("Qwen2VLImageProcessorPil", dict(patch_size=16, min_pixels=64 * 64, max_pixels=128 * 128)),
        dict(text_config=_text(num_hidden_layers=2, head_dim=32, layer_types=["linear_attention", "full_attention"],
                               linear_conv_kernel_dim=2, linear_key_head_dim=16, linear_value_head_dim=16,
                               linear_num_key_heads=2, linear_num_value_heads=4, rope_parameters={
                                   "rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 4, 4],
                                   "mrope_interleaved": True}),
             vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN,
                                patch_size=16, num_position_embeddings=16),
             **_QWEN_IDS),
        video_processor=("Qwen3VLVideoProcessor", {})),
    "gemma4": TinyFamily(  # Gemma 4: pooled soft tokens, an audio feature extractor beside the image processor
        "gemma4", templates.GEMMA4_CHAT_TEMPLATE,
        {"bos_token": "<bos>", "eos_token": "<end_of_turn>", "pad_token": "<pad>", "boi_token": "<start_of_image>",
         "eoi_token": "<end_of_image>", "image_token": "<|image|>", "video_token": "<|video|>",
         "boa_token": "<start_of_audio>", "eoa_token": "<end_of_audio>", "audio_token": "<audio_soft_token>"},
        ("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
         "<|image|>", "<|video|>", "<start_of_audio>", "<end_of_audio>", "<audio_soft_token>"),
        ("Gemma4ImageProcessorPil", dict(patch_size=8, max_soft_tokens=70, pooling_kernel_size=2)),
        dict(text_config=_text(head_dim=32, sliding_window=64, layer_types=["full_attention"],
                               vocab_size_per_layer_input=BPE_VOCAB_SIZE, hidden_size_per_layer_input=16,
                               pad_token_id=Token("<pad>"), bos_token_id=Token("<bos>"),
                               eos_token_id=Token("<end_of_turn>")),
             vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                num_key_value_heads=2, head_dim=16, patch_size=8, pooling_kernel_size=2,
                                position_embedding_size=64),
             audio_config=None,
             boi_token_id=Token("<start_of_image>"), eoi_token_id=Token("<end_of_image>"),
             image_token_id=Token("<|image|>"), video_token_id=Token("<|video|>"),
             boa_token_id=Token("<start_of_audio>"), eoa_token_index=Token("<end_of_audio>"),
             audio_token_id=Token("<audio_soft_token>")),
        dict(image_seq_length=70),
        video_processor=("Gemma4VideoProcessor", dict(max_soft_tokens=70, pooling_kernel_size=2, num_frames=2)),
        feature_extractor=("Gemma4AudioFeatureExtractor", {})),
    "ernie4.5-vl": TinyFamily(  # ERNIE 4.5-VL: a mixture-of-experts decoder with vision experts, a resampler
        "ernie4_5_vl_moe", templates.ERNIE4_5_VL_CHAT_TEMPLATE,
        {"bos_token": "<|begin_of_sentence|>", "eos_token": "<|end_of_sentence|>", "pad_token": "<unk>",
         "image_token": "<|IMAGE_PLACEHOLDER|>", "image_start_token": "<|IMAGE_START|>",
         "image_end_token": "<|IMAGE_END|>", "video_token": "<|VIDEO_PLACEHOLDER|>",
         "video_start_token": "<|VIDEO_START|>", "video_end_token": "<|VIDEO_END|>"},
        ("<unk>", "<|begin_of_sentence|>", "<|end_of_sentence|>", "<|IMAGE_START|>", "<|IMAGE_PLACEHOLDER|>",
         "<|IMAGE_END|>", "<|VIDEO_START|>", "<|VIDEO_PLACEHOLDER|>", "<|VIDEO_END|>"),
        ("Ernie4_5_VLMoeImageProcessorPil", dict(min_pixels=56 * 56, max_pixels=112 * 112)),
        dict(text_config=_text(head_dim=32, moe_num_experts=2, moe_k=1, moe_num_shared_experts=1,
                               moe_intermediate_size=[32, 32], mlp_layer_types=["sparse"],
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "mrope_section": [6, 6, 4]}),
             vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14),
             image_token_id=Token("<|IMAGE_PLACEHOLDER|>"), image_start_token_id=Token("<|IMAGE_START|>"),
             image_end_token_id=Token("<|IMAGE_END|>"), video_token_id=Token("<|VIDEO_PLACEHOLDER|>"),
             video_start_token_id=Token("<|VIDEO_START|>"), video_end_token_id=Token("<|VIDEO_END|>")),
        video_processor=("Ernie4_5_VLMoeVideoProcessor", dict(draw_on_frames=False, temporal_patch_size=2))),
    "ovis2": TinyFamily(  # Ovis2: a visual tokenizer; <image> expands into <IMG_ATOM> tokens and grid markers
        "ovis2", templates.OVIS2_CHAT_TEMPLATE,
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        _CHATML + ("<image>", "<IMG_START>", "<IMG_ATOM>", "<IMG_GRID>", "<IMG_COL>", "<IMG_ROW>", "<IMG_END>"),
        ("Ovis2ImageProcessorPil", dict(size={"height": 32, "width": 32}, crop_to_patches=False)),
        dict(text_config=dict(_text(), model_type="qwen2"),
             vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=32, patch_size=8, hidden_stride=2, vocab_size=64),
             hidden_size=HIDDEN, image_token_id=Token("<IMG_ATOM>"),
             visual_indicator_token_ids=[Token("<IMG_START>"), Token("<IMG_GRID>"), Token("<IMG_COL>"),
                                         Token("<IMG_ROW>"), Token("<IMG_END>")]),
        dict(image_seq_length=4)),
    "lfm2-vl": TinyFamily(  # LFM2-VL: a SigLIP2 tower, a decoder of short convolutions and attention
        "lfm2_vl", templates.LFM2_VL_CHAT_TEMPLATE,
        {"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|pad|>", "image_token": "<image>",
         "image_start_token": "<|image_start|>", "image_end_token": "<|image_end|>",
         "image_thumbnail_token": "<|img_thumbnail|>"},
        ("<|pad|>", "<|startoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<|image_start|>", "<|image_end|>",
         "<|img_thumbnail|>"),
        ("Lfm2VlImageProcessor", dict(do_image_splitting=False, min_image_tokens=4, max_image_tokens=16,
                                      encoder_patch_size=8, tile_size=32, downsample_factor=2)),
        dict(text_config=dict(_text(num_hidden_layers=2, layer_types=["conv", "full_attention"], conv_L_cache=3),
                              model_type="lfm2"),
             vision_config=dict(model_type="siglip2_vision_model", hidden_size=32, intermediate_size=64,
                                num_hidden_layers=1, num_attention_heads=2, patch_size=8, num_patches=64,
                                vision_use_head=False),
             image_token_id=Token("<image>"), projector_hidden_size=32, downsample_factor=2)),
    "mistral3": TinyFamily(  # Mistral Small 3.1: Pixtral's tower and image tokens, a 2 x 2 patch merger
        "mistral3", templates.MISTRAL3_CHAT_TEMPLATE,
        {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"},
        ("<unk>", "<s>", "</s>", "<pad>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[IMG]",
         "[IMG_BREAK]", "[IMG_END]"),
        ("PixtralImageProcessor", dict(size={"longest_edge": 64}, patch_size=8)),
        dict(text_config=dict(_text(head_dim=32), model_type="mistral"),
             vision_config=dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, head_dim=16, image_size=64, patch_size=8),
             spatial_merge_size=2, image_token_index=Token("[IMG]"), vision_feature_layer=-1),
        dict(patch_size=8, spatial_merge_size=2)),
    "llama4": TinyFamily(  # Llama 4: a pixel-shuffle adapter in the tower, a mixture-of-experts decoder
        "llama4", templates.LLAMA4_CHAT_TEMPLATE,
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot|>", "pad_token": "<|finetune_right_pad|>"},
        _LLAMA4_TOKENS,
        ("Llama4ImageProcessor", dict(size={"height": 32, "width": 32}, max_patches=2)),
        dict(text_config=_text(head_dim=32, intermediate_size_mlp=2 * HIDDEN, num_local_experts=2,
                               num_experts_per_tok=1, attention_chunk_size=4096),
             vision_config=dict(hidden_size=32, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                                image_size=32, patch_size=8, vision_output_dim=HIDDEN, projector_input_dim=HIDDEN,
                                projector_output_dim=HIDDEN),  # intermediate: 4 x hidden, what pixel shuffle makes
             boi_token_index=Token("<|image_start|>"), eoi_token_index=Token("<|image_end|>"),
             image_token_index=Token("<|patch|>")),
        dict(patch_size=8, pixel_shuffle_ratio=0.5)),
    "perception-lm": TinyFamily(  # PerceptionLM: a timm Perception Encoder tower, pooled 2 x 2 after projection
        "perception_lm", templates.PERCEPTION_LM_CHAT_TEMPLATE,
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|end_of_text|>",
         "image_token": "<|image|>", "video_token": "<|video|>"},
        ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
         "<|image|>", "<|video|>"),
        ("PerceptionLMImageProcessor", dict(tile_size=32, max_num_tiles=1, size={"height": 32, "width": 32})),
        dict(text_config=dict(_text(head_dim=32), model_type="llama"),
             vision_config=dict(architecture="vit_pe_core_tiny_patch16_384", num_classes=0, model_args=dict(
                 embed_dim=32, depth=1, num_heads=2, img_size=[32, 32], patch_size=8, global_pool="",
                 use_post_transformer_norm=False, ref_feat_shape=[4, 4])),
             projector_pooling_ratio=2, image_token_id=Token("<|image|>"), video_token_id=Token("<|video|>")),
        dict(patch_size=8, pooling_ratio=2),
        video_processor=("PerceptionLMVideoProcessor", dict(size={"height": 32, "width": 32}))),
}

VLLM_CHECKED = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl", "smolvlm", "smolvlm2", "gemma3", "llava-onevision", "internvl",
                "glm4.1v")
"""The families the vLLM tests run (``make test-vllm``); the others are not checked against vLLM yet."""


def family(name: str) -> TinyFamily:
    if name not in FAMILIES:
        raise ValueError(f"no tiny checkpoint for family {name!r}; known families: {', '.join(FAMILIES)}")
    return FAMILIES[name]
