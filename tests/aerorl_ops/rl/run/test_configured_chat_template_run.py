"""A ``[models.<key>] chat_template`` reaches a training run whose ``base_model`` is that key, as it
reaches the benchmark and evaluation: a tiny PaliGemma without a template of its own (as stock PaliGemma
checkpoints ship) trains 1 + 1 steps through ``train_and_record`` with every prompt rendered by the
configured template (not PaliGemma's own prompt format, its default), and the run's checkpoints save the
template with their processor, so a checkpoint loads as a model that renders the same prompts."""

from __future__ import annotations

from functools import partial

import duckdb
import torch

from aerorl_ops.config.benchmark import load_benchmark_config
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_runner import replies
from aerorl_ops.eval_runner.episodes import observe_all
from aerorl_ops.models.checkpoint_refs import step_folders
from aerorl_ops.models.loading import ModelSource, load_processor
from aerorl_ops.rl.run.phases import WARMUP_DIR
from aerorl_ops.rl.run.train_and_record import ModelPlace, ReportPlace, RunOptions, train_and_record

KEY = "paligemma-answer-en"
TEMPLATE = ("{% for message in messages %}{% if message['role'] == 'user' %}<image>answer en "
            "{{ message['content'][-1]['text'] }}{% elif message['role'] == 'assistant' %}"
            "{{ message['content'][0]['text'] }}{{ eos_token }}{% endif %}{% endfor %}")
"""PaliGemma's task-prefix style ("answer en <question>"), which its own prompt format (the default
without a template) does not write."""
SETTINGS = TrainingSettings(base_model=KEY, env="easy_vqa", train_limit=16, warmup_steps=1, warmup_batch_size=2,
                            steps=1, prompts_per_step=1, group_size=2, max_new_tokens=3, kl_coef=0.0,
                            learning_rate=1e-2, seed=3, eval_size=2, eval_interval=10, sampled_eval_size=0,
                            control=False, swap_check_type="", checkpoint_interval=100)


class _Quiet:
    def info(self, msg):
        pass

    def warning(self, msg):
        pass


def test_a_configured_chat_template_renders_a_run_s_prompts_and_its_checkpoints(tiny_family_dir, models_dir,
                                                                               tmp_path, monkeypatch):
    torch.set_num_threads(1)
    folder = tiny_family_dir("paligemma")
    config = tmp_path / "bench.toml"
    config.write_text(f"[benchmark]\nbatch_sizes = [1]\n\n[models.{KEY}]\nsource = \"{folder}\"\n"
                      f"chat_template = '''{TEMPLATE}'''\n")
    rendered: list[str] = []
    render = replies.observation_prompts

    def recording(loaded, observations):
        prompts = render(loaded, observations)
        rendered.extend(prompts)
        return prompts

    monkeypatch.setattr(replies, "observation_prompts", recording)  # what every phase's encoding renders
    database = str(tmp_path / "report.duckdb")
    options = RunOptions("templated", False, False, "", "offline")
    run = train_and_record(load_benchmark_config(config), SETTINGS, options,
                           ModelPlace(models_dir, True, "cpu", 1, 1.0),
                           ReportPlace(database, partial(duckdb.connect, database), tmp_path / "checkpoints"),
                           log=_Quiet())
    assert run is not None and run.stored.recorded_steps == 2
    assert rendered and all(prompt.startswith("<image>answer en ") for prompt in rendered), rendered

    env = make_env("easy_vqa", split="train", limit=2, seed=1)
    messages = observe_all(env, env.items[:1])[0].messages
    question = messages[-1]["content"][-1]["text"]
    own = load_processor(ModelSource(str(folder)))  # the default it would have had: PaliGemma's own format
    assert own.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == f"<image>{question}"
    run_dir = tmp_path / "checkpoints" / run.run_id
    checkpoints = [run_dir / WARMUP_DIR] + [path for _, path in step_folders(run_dir)]
    assert sorted(path.name for path in checkpoints) == ["step-1", "step-2", WARMUP_DIR]  # the warm-up's end, the last
    for checkpoint in checkpoints:  # as a [models] source with no chat_template: the saved one
        processor = load_processor(ModelSource(str(checkpoint)))
        assert processor.chat_template == TEMPLATE
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert prompt == f"<image>answer en {question}"
        images = observe_all(env, env.items[:1])[0].images
        ids = processor(text=[prompt], images=[images], return_tensors="pt")["input_ids"]
        prefix = processor.tokenizer.encode("answer en", add_special_tokens=False)
        row = ids[0].tolist()
        assert any(row[i:i + len(prefix)] == prefix for i in range(len(row))), row
