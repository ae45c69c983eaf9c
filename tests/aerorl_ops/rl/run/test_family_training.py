"""Training every VLM family's tiny random-init checkpoint (``tests/conftest.py``'s ``tiny_family_dir``):
the trainer scores what ``generate`` sampled with the same inputs, an earlier token's log-prob never
sees a later one, the vision encoder freezes and the projector does not (unless asked), the supervised
target ends with the token the chat template ends a turn with, and a 2 + 2-step run goes through,
plain and with a frozen tower plus LoRA."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from transformers import AutoConfig

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import items_at
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_runner.episodes import observe_all
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.generation.batched import encode_prompts, eos_token_ids, generate_rows
from aerorl_ops.generation.suppression import suppressed_token_ids
from aerorl_ops.models.family_parts import part_of, part_parameters
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.models.tiny_family_build import random_init_model
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.lora import ADAPTER_DIR, attach_lora, lora_config, lora_layers
from aerorl_ops.rl.runtime.policy import REFERENCE_QUANTIZATIONS, policy_and_reference
from aerorl_ops.rl.runtime.reference_quantization import kernel_unfit_layers
from aerorl_ops.rl.step.per_token_inputs import (
    UnknownPerTokenInputError,
    check_per_token_inputs,
    left_out_after_prefill,
)
from aerorl_ops.rl.step.rollout import supervised_batch
from aerorl_ops.rl.step.sequences import append_completions, completion_logprobs
from aerorl_ops.rl.step.trainer import RLTrainer
from tests.aerorl_ops.models.family_params import family_params

END_OF_TURN = {"qwen2-vl": "<|im_end|>", "qwen2.5-vl": "<|im_end|>", "qwen3-vl": "<|im_end|>",
               "smolvlm": "<end_of_utterance>", "smolvlm2": "<end_of_utterance>", "gemma3": "<end_of_turn>",
               "llava-onevision": "<|im_end|>", "internvl": "<|im_end|>", "glm4.1v": "<|user|>",
               "qwen3-vl-moe": "<|im_end|>", "paligemma": "<eos>", "mllama": "<|eot_id|>",
               "aya-vision": "<|END_OF_TURN_TOKEN|>", "idefics2": "<end_of_utterance>", "llava": "</s>",
               "llava-next": "</s>", "mistral3": "</s>", "llama4": "<|eot|>", "perception-lm": "<|eot_id|>",
               "qwen3.5": "<|im_end|>", "gemma4": "<end_of_turn>", "ernie4.5-vl": "<|end_of_sentence|>",
               "ovis2": "<|im_end|>", "lfm2-vl": "<|im_end|>"}
"""What each family's chat template writes after an assistant reply, written out by hand (LLaVA-1.5's writes
no special token: its EOS; PaliGemma's prompt format ends a reply with EOS)."""
EVERY_FAMILY = family_params()

STEPS = dict(group_size=2, max_new_tokens=3, kl_coef=0.0, learning_rate=1e-2, seed=3)


@pytest.fixture(scope="module")
def env():
    torch.set_num_threads(1)
    return make_env("easy_vqa", split="train", limit=16, seed=1)


def generated_with_logprobs(loaded, inputs, max_new_tokens=4) -> tuple[list[list[int]], list[torch.Tensor]]:
    """Greedy ``generate`` on ``inputs`` (every special token but EOS suppressed, as the trainer's
    rollouts): each row's tokens up to and including EOS, and the log-prob ``generate`` gave each."""
    eos = eos_token_ids(loaded)
    model = loaded.model
    suppress = suppressed_token_ids(loaded.tokenizer, eos, model.get_output_embeddings().weight.shape[0])
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos,
                             pad_token_id=loaded.tokenizer.pad_token_id, suppress_tokens=suppress,
                             output_logits=True, return_dict_in_generate=True)
    new = out.sequences[:, inputs["input_ids"].shape[1]:]  # [B, C]
    logprobs = torch.stack(out.logits, dim=1).float().log_softmax(-1)  # [B, C, V]
    tokens, scored = [], []
    for row, ids in enumerate(new.tolist()):
        length = next((i + 1 for i, t in enumerate(ids) if t in eos), len(ids))
        tokens.append(ids[:length])
        scored.append(logprobs[row, torch.arange(length), new[row, :length]])  # [length]
    return tokens, scored


@pytest.fixture(scope="module")
def three_layer_vlm(tiny_family_dir, tmp_path_factory):
    """A family's tiny checkpoint with a three-layer decoder (seeded random init, the same processor):
    with one layer, nothing that reads the image positions' outputs follows, so a changed attention
    pattern over the image (Gemma 3's ``token_type_ids``) could not show in the completion's log-probs."""
    root, built = tmp_path_factory.mktemp("three_layer"), {}

    def load(name: str):
        if name not in built:
            folder = shutil.copytree(tiny_family_dir(name), root / name)
            config = AutoConfig.from_pretrained(folder)
            settings = config.to_dict()
            text = settings.get("text_config", settings)
            layers = text["num_hidden_layers"]
            for key, value in text.items():  # one entry per layer: the layer types, Llama 4's RoPE layers, ERNIE's MLPs
                if isinstance(value, list) and len(value) == layers and key != "eos_token_id":
                    text[key] = [value[layer % layers] for layer in range(3)]
                if isinstance(value, dict) and set(value) == {str(layer) for layer in range(layers)}:  # Gemma 4's
                    text[key] = {str(layer): value[str(layer % layers)] for layer in range(3)}  # per-layer overrides
            text["num_hidden_layers"] = 3
            random_init_model(type(config).from_dict(settings), seed=1).save_pretrained(folder)
            built[name] = load_vlm(ModelSource(str(folder)), torch.device("cpu"))
        return built[name]

    return load


def scored_and_generated(loaded, env, drop: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The trainer's log-probs of what ``generate`` replied to two prompts (``drop``: an input left out
    of the trainer's batch), and ``generate``'s own: [N] each."""
    inputs = encode_observations(loaded, observe_all(env, items_at(env, [0, 1])))
    tokens, expected = generated_with_logprobs(loaded, inputs)
    batch = append_completions(inputs, tokens, loaded)
    assert set(inputs) - {"labels"} <= set(batch.inputs)  # every processor input reaches the model
    if drop is not None:
        del batch.inputs[drop]
    with torch.no_grad():
        scored = completion_logprobs(loaded.model, batch).logprobs  # [N]
    assert scored.shape == (sum(map(len, tokens)),)
    return scored, torch.cat(expected)


@pytest.mark.parametrize("name", EVERY_FAMILY)
def test_the_trainer_scores_replies_as_generate_did(three_layer_vlm, env, name):
    scored, expected = scored_and_generated(three_layer_vlm(name), env)
    assert torch.allclose(scored, expected, atol=1e-5, rtol=0), (scored, expected)


def test_what_the_trainer_would_get_wrong_with_a_dropped_input(three_layer_vlm, env):
    """What the test above catches. Gemma 3's image tokens attend to each other both ways only with
    ``token_type_ids``, which the old allow-list dropped; LLaVA-OneVision needs ``image_sizes``."""
    loaded = three_layer_vlm("gemma3")
    inputs = encode_observations(loaded, observe_all(env, items_at(env, [0])))
    batch = append_completions(inputs, [[5, 6]], loaded)
    assert batch.inputs["token_type_ids"][0, -2:].tolist() == [0, 0]  # completion tokens are text
    scored, expected = scored_and_generated(loaded, env, drop="token_type_ids")
    assert float((scored - expected).abs().max()) > 1e-4
    with pytest.raises(TypeError):  # transformers iterates over image_sizes=None
        scored_and_generated(three_layer_vlm("llava-onevision"), env, drop="image_sizes")


@pytest.mark.parametrize("name", EVERY_FAMILY)
def test_the_training_mask_counts_the_vision_tokens_a_benchmark_record_counts(tiny_family_vlm, few_rows, name):
    """One count: Aya Vision's 7 per image (4 patches and its start, global-tile and end tokens) in both."""
    loaded, rows = tiny_family_vlm(name), few_rows[:3]
    samples = generate_rows(loaded, rows, batch_size=3, settings=GenerationSettings(max_new_tokens=1))
    batch = append_completions(encode_prompts(loaded, rows), [[], [], []], loaded)
    assert batch.vision_mask.sum(dim=1).tolist() == [s.vision_tokens for s in samples]
    assert min(s.vision_tokens for s in samples) > 0


def two_completions(loaded, env):
    """One prompt twice, followed by two completions that differ only in their last (fourth) token."""
    words = loaded.tokenizer.encode(" the red circle is", add_special_tokens=False)[:4]
    other = loaded.tokenizer.encode(" blue", add_special_tokens=False)[0]
    assert len(words) == 4 and other != words[-1]
    return append_completions(encode_observations(loaded, observe_all(env, items_at(env, [0, 0]))),
                              [words, words[:-1] + [other]], loaded)


def assert_causal(loaded, env) -> None:
    """Every earlier token's log-prob is the same in both of ``two_completions`` (to 1e-6); the last differs."""
    with torch.no_grad():
        scored = completion_logprobs(loaded.model, two_completions(loaded, env)).logprobs.view(2, 4)  # [2, 4]
    assert float((scored[0, :3] - scored[1, :3]).abs().max()) <= 1e-6, scored
    assert float((scored[0, 3] - scored[1, 3]).abs()) > 1e-6  # the last token differs, and so does its log-prob


@pytest.mark.parametrize("name", EVERY_FAMILY)
def test_an_earlier_token_never_sees_a_later_one(tiny_family_vlm, env, name):
    """Two completions of one prompt that differ only in their last token: every earlier token's log-prob
    is the same in both (PaliGemma's completion is its causal suffix, not its bidirectional prefix)."""
    assert_causal(tiny_family_vlm(name), env)


def test_paligemma_s_completion_would_see_ahead_as_its_prefix(tiny_family_vlm, env):
    """What the test above catches: PaliGemma's completion typed 0 (its bidirectional prefix), as a
    completion was before, gives an earlier token a log-prob that depends on the last one."""
    loaded = tiny_family_vlm("paligemma")
    batch = two_completions(loaded, env)
    prompt = batch.input_ids.shape[1] - 4
    assert batch.inputs["token_type_ids"][:, prompt:].tolist() == [[1] * 4] * 2  # the causal suffix
    batch.inputs["token_type_ids"][:, prompt:] = 0
    with torch.no_grad():
        scored = completion_logprobs(loaded.model, batch).logprobs.view(2, 4)  # [2, 4]
    assert float((scored[0, :3] - scored[1, :3]).abs().max()) > 1e-4


def test_paligemma_with_a_configured_chat_template_is_causal_and_ends_its_turn_as_the_template_does(
        tiny_family_dir, env):
    template = ("{% for message in messages %}{% if message['role'] == 'user' %}<image>question: "
                "{{ message['content'][-1]['text'] }}{% else %}{{ message['content'][0]['text'] }}<pad>{% endif %}"
                "{% endfor %}")
    loaded = load_vlm(ModelSource(str(tiny_family_dir("paligemma")), chat_template=template), torch.device("cpu"))
    assert_causal(loaded, env)
    batch = supervised_batch(loaded, env, items_at(env, [0]))
    assert batch.input_ids[0][batch.completion_mask[0]].tolist()[-1] == loaded.tokenizer.pad_token_id


def test_llama_3_2_vision_s_completion_attends_to_the_last_prompt_token_s_images(tiny_family_vlm, env):
    loaded = tiny_family_vlm("mllama")
    inputs = encode_observations(loaded, observe_all(env, items_at(env, [0, 1])))
    batch = append_completions(inputs, [[5, 6, 7], [5]], loaded)
    mask, prompt = batch.inputs["cross_attention_mask"], inputs["input_ids"].shape[1]  # [2, P + 3, images, tiles]
    assert mask.shape == (2, prompt + 3, *inputs["cross_attention_mask"].shape[2:])
    assert torch.equal(mask[:, :prompt], inputs["cross_attention_mask"])
    for position in range(prompt, prompt + 3):
        assert torch.equal(mask[:, position], inputs["cross_attention_mask"][:, -1])


def test_an_unknown_per_token_input_is_an_error_naming_it(tiny_family_vlm, env):
    loaded = tiny_family_vlm("qwen2-vl")
    inputs = dict(encode_observations(loaded, observe_all(env, items_at(env, [0]))))
    inputs["extra_mask"] = torch.ones_like(inputs["input_ids"])
    inputs["extra_boxes"] = torch.ones(*inputs["input_ids"].shape, 4)  # any rank: dimension 1 is the prompt length
    with pytest.raises(UnknownPerTokenInputError, match=r"^the processor of Qwen2VLForConditionalGeneration "
                                                        r"returned per-token input\(s\) \['extra_mask', 'extra_boxes'\]"
                                                        ".*generate neither extends nor leaves out"):
        append_completions(inputs, [[5]], loaded)
    with pytest.raises(UnknownPerTokenInputError, match="'extra_mask'"):
        check_per_token_inputs(loaded.model, inputs)


def test_an_unknown_per_token_input_under_lora_names_the_model_not_its_wrapper(tiny_family_dir, env):
    loaded = load_vlm(ModelSource(str(tiny_family_dir("qwen2-vl"))), torch.device("cpu"))
    loaded.model = attach_lora(loaded.model, TrainingSettings(lora_rank=2), loaded.vision.parts)
    inputs = dict(encode_observations(loaded, observe_all(env, items_at(env, [0]))))
    inputs["extra_mask"] = torch.ones_like(inputs["input_ids"])
    with pytest.raises(UnknownPerTokenInputError, match="^the processor of Qwen2VLForConditionalGeneration returned"):
        check_per_token_inputs(loaded.model, inputs)


def test_ernie_s_moe_token_types_are_text_over_a_completion_as_its_generate_leaves_them_out(tiny_family_vlm, env):
    """ERNIE 4.5-VL's ``moe_mm_token_type_ids`` (1 routes a token to the vision experts) reach only the prompt's
    forward in ``generate``: every generated token is routed as text, so the trainer's completion takes 0."""
    loaded = tiny_family_vlm("ernie4.5-vl")
    inputs = encode_observations(loaded, observe_all(env, items_at(env, [0])))
    assert left_out_after_prefill(loaded.model, inputs, ["moe_mm_token_type_ids", "mm_token_type_ids"]) == {
        "moe_mm_token_type_ids", "mm_token_type_ids"}  # the latter's generation update extends it with 0 too
    words = loaded.tokenizer.encode(" the red circle", add_special_tokens=False)[:3]  # text, as generated
    batch = append_completions(inputs, [words], loaded)
    prompt = inputs["input_ids"].shape[1]
    assert batch.inputs["moe_mm_token_type_ids"][0, prompt:].tolist() == [0, 0, 0]
    assert torch.equal(batch.inputs["moe_mm_token_type_ids"][:, :prompt], inputs["moe_mm_token_type_ids"])
    assert inputs["moe_mm_token_type_ids"].sum() > batch.vision_mask.sum()  # its image start and end tokens too


def test_a_run_names_an_unknown_per_token_input_before_its_first_step(tiny_family_dir, env, tmp_path, monkeypatch):
    from aerorl_ops.rl.run import phases as training_run

    def with_extra(loaded, observations):
        inputs = encode_observations(loaded, observations)
        inputs["extra_mask"] = torch.ones_like(inputs["input_ids"])
        return inputs

    monkeypatch.setattr(training_run, "encode_observations", with_extra)  # what the run's check encodes
    steps = []
    with pytest.raises(UnknownPerTokenInputError, match="'extra_mask'"):
        run_training(str(tiny_family_dir("qwen2-vl")), tmp_path / "run", TrainingSettings(**RUN), env, env, range(2),
                     device="cpu", resume=False, on_step=steps.append)
    assert steps == []


@pytest.mark.parametrize("name", family_params(runs_model=False))
def test_the_supervised_target_ends_with_the_end_of_turn_token(tiny_family_vlm, env, name):
    loaded = tiny_family_vlm(name)
    batch = supervised_batch(loaded, env, items_at(env, [0, 1]))
    end = loaded.tokenizer.convert_tokens_to_ids(END_OF_TURN[name])
    last = [int(row[mask].tolist()[-1]) for row, mask in zip(batch.input_ids, batch.completion_mask, strict=True)]
    assert last == [end, end]


def test_gemma3_ends_its_target_with_end_of_turn_not_eos(tiny_family_dir, env, tmp_path):
    """A real Gemma 3 checkpoint lists ``<eos>`` first among its generation EOS ids."""
    folder = shutil.copytree(tiny_family_dir("gemma3"), tmp_path / "gemma3")
    loaded = load_vlm(ModelSource(str(folder)), torch.device("cpu"))
    eos, end = loaded.tokenizer.convert_tokens_to_ids(["<eos>", "<end_of_turn>"])
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "eos_token_id": [eos, end]}))
    loaded = load_vlm(ModelSource(str(folder)), torch.device("cpu"))
    assert eos_token_ids(loaded) == [eos, end]
    batch = supervised_batch(loaded, env, items_at(env, [0]))
    assert batch.input_ids[0][batch.completion_mask[0]].tolist()[-1] == end


ENCODER = {"qwen2-vl": "model.visual.", "qwen2.5-vl": "model.visual.", "qwen3-vl": "model.visual.",
           "smolvlm": "model.vision_model.", "smolvlm2": "model.vision_model.", "gemma3": "model.vision_tower.",
           "llava-onevision": "model.vision_tower.", "internvl": "model.vision_tower.", "glm4.1v": "model.visual.",
           "qwen3-vl-moe": "model.visual.", "paligemma": "model.vision_tower.", "mllama": "model.vision_model.",
           "aya-vision": "model.vision_tower.", "idefics2": "model.vision_model.", "llava": "model.vision_tower.",
           "llava-next": "model.vision_tower.", "mistral3": "model.vision_tower.", "llama4": "vision_model.",
           "perception-lm": "model.vision_tower.", "qwen3.5": "model.visual.", "gemma4": "model.vision_tower.",
           "ernie4.5-vl": "model.vision_tower.", "ovis2": "model.vision_tower.", "lfm2-vl": "model.vision_tower."}
PROJECTOR = {"qwen2-vl": ("model.visual.merger.",), "qwen2.5-vl": ("model.visual.merger.",),
             "qwen3-vl": ("model.visual.merger.", "model.visual.deepstack_merger_list."),
             "qwen3-vl-moe": ("model.visual.merger.", "model.visual.deepstack_merger_list."),
             "smolvlm": ("model.connector.",), "smolvlm2": ("model.connector.",), "idefics2": ("model.connector.",),
             "gemma3": ("model.multi_modal_projector.",), "paligemma": ("model.multi_modal_projector.",),
             "mllama": ("model.multi_modal_projector.",), "aya-vision": ("model.multi_modal_projector.",),
             "llava": ("model.multi_modal_projector.",),
             "llava-onevision": ("model.multi_modal_projector.", "model.image_newline"),
             "llava-next": ("model.multi_modal_projector.", "model.image_newline"),
             "internvl": ("model.multi_modal_projector.",), "glm4.1v": ("model.visual.merger.",),
             "mistral3": ("model.multi_modal_projector.",), "perception-lm": ("model.multi_modal_projector.",),
             "llama4": ("vision_model.vision_adapter.", "multi_modal_projector."),  # Llama 4's: not under ``model.``
             "qwen3.5": ("model.visual.merger.",), "gemma4": ("model.embed_vision.",),
             "ernie4.5-vl": ("model.resampler_model.",), "ovis2": ("model.visual_embeddings_table.",),
             "lfm2-vl": ("model.multi_modal_projector.",)}
"""Each family's encoder and projector parameters, by hand from transformers' module trees: what the trace of
``models.vision_trace`` must find (``LoadedVLM.vision.parts``)."""


def head_name(model) -> str:
    """The LM head's module name: ``lm_head``, Llama 4's ``language_model.lm_head``."""
    return next(name for name, module in model.named_modules() if module is model.get_output_embeddings())


@pytest.mark.parametrize("name", family_params(runs_model=False))
def test_each_family_s_encoder_and_projector_are_traced_from_the_model(tiny_family_vlm, name):
    loaded = tiny_family_vlm(name)
    model, parts = loaded.model, loaded.vision.parts
    names = [n for n, _ in model.named_parameters()]
    projector = {n for n in names if n.startswith(PROJECTOR[name])}
    assert projector and set(part_parameters(model, parts, "projector")) == projector
    encoder = {n for n in names if n.startswith(ENCODER[name])} - projector
    assert set(part_parameters(model, parts, "encoder")) == encoder
    excluded = lora_config(model, TrainingSettings(lora_rank=2), parts).exclude_modules  # a regex on module names
    assert re.fullmatch(excluded, head_name(model)) and re.fullmatch(excluded, ENCODER[name].rstrip(".") + ".x")
    modules = [prefix.rstrip(".") for prefix in PROJECTOR[name] if prefix.endswith(".")]  # not image_newline
    assert all(re.fullmatch(excluded, module) for module in modules)
    assert not re.fullmatch(excluded, "model.language_model.layers.0.self_attn.q_proj")


def snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("name", EVERY_FAMILY)
@pytest.mark.parametrize("freeze_projector", [False, True])
def test_a_frozen_encoder_stays_while_the_projector_trains_unless_frozen(tiny_family_dir, env, name,
                                                                         freeze_projector):
    settings = TrainingSettings(**STEPS, freeze_vision_tower=True, freeze_projector=freeze_projector)
    policy, _ = policy_and_reference(str(tiny_family_dir(name)), settings, device="cpu")
    model, parts = policy.loaded.model, policy.loaded.vision.parts
    encoder, projector = part_parameters(model, parts, "encoder"), part_parameters(model, parts, "projector")
    assert encoder and projector
    before = snapshot(model)
    trainer = RLTrainer(settings.resolve(), policy)
    for step in range(2):
        trainer.supervised_step(env, [2 * step, 2 * step + 1])
    for step in range(2):
        trainer.rl_step(env, [4 + step])
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n], before[n]) and not after[n].requires_grad for n in encoder)
    held = {id(p) for p in trainer.optimizer.state}
    assert not held & {id(p) for p in encoder.values()}
    if freeze_projector:
        assert all(torch.equal(after[n], before[n]) for n in projector) and not held & set(map(id, projector.values()))
    else:
        assert any(not torch.equal(after[n], before[n]) for n in projector), "the projector did not train"
    language = [n for n in after if part_of(n, parts) is None]
    assert any(not torch.equal(after[n], before[n]) for n in language)


RUN = dict(STEPS, warmup_steps=2, warmup_batch_size=2, steps=2, prompts_per_step=1, eval_interval=10,
           eval_size=2, sampled_eval_size=1, control=False, swap_check_type="", checkpoint_interval=100)
NO_SAMPLED_EVAL = ("llama4",)
"""Families whose n replies per prompt from one ``generate`` call (MAYE's sampled evaluation) fail inside
transformers (5.19 to 5.24): Llama 4's image features carry no ``pooler_output``, so ``generate`` does not
repeat them for the n copies ("Image features and image tokens do not match"). Their runs leave it out."""


@pytest.mark.parametrize("name", EVERY_FAMILY)
@pytest.mark.parametrize("recipe", ["plain", "frozen_lora"])
def test_a_two_plus_two_step_run(tiny_family_dir, env, tmp_path, name, recipe):
    base = tiny_family_dir(name)
    extra = dict(freeze_vision_tower=True, lora_rank=4, reference="lora_base") if recipe == "frozen_lora" else {}
    settings = TrainingSettings(**{**RUN, **extra, **({"sampled_eval_size": 0} if name in NO_SAMPLED_EVAL else {})})
    result = run_training(str(base), tmp_path / "run", settings, env, env, range(2), device="cpu", resume=False)
    assert [s.step for s in result.steps] == [1, 2, 3, 4]
    assert all(torch.isfinite(torch.tensor(s.loss)) for s in result.steps)
    final = load_vlm(ModelSource(str(result.final_checkpoint)), torch.device("cpu"))
    start = load_vlm(ModelSource(str(base)), torch.device("cpu")).model.state_dict()
    trained = final.model.state_dict()
    parts = final.vision.parts
    vision = [k for k in start if part_of(k, parts)]
    language = [k for k in start if not part_of(k, parts)]
    assert vision and language
    assert any(not torch.equal(trained[k], start[k]) for k in language)
    if recipe == "frozen_lora":  # the encoder and the projector are not adapted and do not train
        assert (result.final_checkpoint / ADAPTER_DIR).is_dir()
        assert all(torch.equal(trained[k], start[k]) for k in vision)
        peft = policy_and_reference(str(base), settings, device="cpu")[0].loaded.model
        assert not any(part_of(n, parts) for n, _ in lora_layers(peft))


QUANTIZED_ALGORITHMS = [("grpo", 8), ("dr_grpo", 4), ("rloo", 8), ("reinforce_pp", 4), ("ppo", 8)]
"""Every algorithm, each against an int8 or an nf4 reference (both quantizations meet every family)."""


@pytest.mark.parametrize(("name", "algorithm", "quant_bits"),
                         family_params(*QUANTIZED_ALGORITHMS))
def test_an_rl_step_of_every_algorithm_against_a_quantized_reference(tiny_family_dir, env, name, algorithm,
                                                                      quant_bits):
    """One RL step with the KL to a bitsandbytes-quantized copy of the family's checkpoint: the reference
    loads quantized (its log-probs are not the policy's) and scores the replies (a finite KL), and the policy
    moves. The KL itself may be 0 in float32 where the quantization error is ~1e-5 (k3 cancels)."""
    base = str(tiny_family_dir(name))
    settings = TrainingSettings(**dict(STEPS, kl_coef=0.05), algorithm=algorithm, quant_bits=quant_bits)
    policy, reference = policy_and_reference(base, settings, device="cpu")
    reference.anchor(base, rl_start=True)
    batch = supervised_batch(policy.loaded, env, items_at(env, [0]))
    with torch.inference_mode():
        ours, theirs = (completion_logprobs(m, batch).logprobs for m in (policy.loaded.model, reference.loaded.model))
    assert not torch.equal(ours, theirs)  # a quantized copy
    trainer = RLTrainer(settings.resolve(), policy)
    trainer.reference = reference
    before = snapshot(policy.loaded.model)
    stats = trainer.rl_step(env, [0, 1])
    assert reference.is_loaded and reference.quantization_mode == {8: "bitsandbytes-int8", 4: "bitsandbytes-nf4"}[
        quant_bits]
    assert stats.kl is not None and torch.isfinite(torch.tensor(stats.kl))
    assert head_name(reference.loaded.model) in reference.unquantized  # the fused log-prob path reads its weight
    after = dict(policy.loaded.model.named_parameters())
    assert any(not torch.equal(after[n], before[n]) for n in before if after[n].requires_grad)


@pytest.mark.parametrize(("name", "quant_bits", "refused"), [
    ("aya-vision", 8, "model.multi_modal_projector.linear_1"),  # its input is 4-D: [images, rows, columns, features]
    ("mllama", 8, "model.multi_modal_projector"),  # 5-D: [batch, images, tiles, patches, features]
    ("idefics2", 4, "model.connector.perceiver_resampler.layers.0.self_attn.k_proj"),  # 16 outputs: no 32-block
])
def test_a_layer_whose_input_the_kernel_refuses_stays_in_full_precision(tiny_family_dir, name, quant_bits, refused):
    base = str(tiny_family_dir(name))
    quantization = REFERENCE_QUANTIZATIONS[quant_bits]
    first = load_vlm(ModelSource(base), torch.device("cpu"), quantization_config=quantization.transformers_config(base))
    assert refused in kernel_unfit_layers(first)  # the kernel itself refuses the layer's input
    _, reference = policy_and_reference(base, TrainingSettings(quant_bits=quant_bits), device="cpu")
    model = reference.loaded.model
    assert refused in reference.unquantized and type(model.get_submodule(refused)) is torch.nn.Linear
    assert kernel_unfit_layers(reference.loaded) == {}
    linear = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    assert len(reference.unquantized) < len(linear)  # the rest is quantized
