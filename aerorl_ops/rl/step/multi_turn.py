"""Multi-turn episodes: the model replies, the environment answers, up to the environment's ``max_turns``.

An environment's ``step`` may return ``done = False`` with an observation: a user turn (text) appended
to the conversation. Each row's completion is then its first reply, the environment's tokens (the
reply's end-of-turn token if the model did not write it, the user turn and the assistant header, as
the model's chat template writes them: :func:`env_turn`), its next reply, and so on. The
``action`` mask is 1 at the model's own tokens and 0 at the environment's: the trainer's loss mask is
the response mask times it, so environment tokens have interior gaps in the mask and never enter the
loss (their log-probs are computed with the rest and multiplied out). Each turn's reward sits at the
last token of that turn's reply (``turn_rewards``): per-turn rewards, or per-episode ones where the
environment gives 0 until its last turn.

A later turn is generated from the conversation so far: the first turn's prompt followed by the
completion tokens, moved flush right (``left_padded``) so ``generate`` continues each row. An
environment turn may show images: its tokens then hold the processor's image placeholders (expanded as
for a prompt) and the conversation's per-image tensors are the processor's for all of the row's
images in order, the first turn's then each later turn's (``encode_episodes``), so each image stays at
its own turn's placeholders. A batch rebuilt from completion ids alone (another rank's rows, a token
budget's cut) finds the later turns' images again by replaying the episode (``replayed_turns``).

With a ``ReplySampler`` (``rollout_backend = "vllm"``), each turn's replies come from the engine instead,
one request per episode: the conversation so far as text (the first turn's prompt, each reply decoded
with its special tokens, each environment turn as the chat template writes it, image placeholders
unexpanded) with every image shown so far and the first turn's video (``episode_limits`` sizes the engine's
per-prompt limits). The completion still holds the sampled token ids, which the policy scores; only the
engine's view of an earlier reply is its text re-tokenized, the same ids unless a reply's text tokenizes
another way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch
from PIL import Image

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import TaskEnv, items_at, max_turns
from aerorl_ops.envs.types import Completion, Observation
from aerorl_ops.eval_runner.episodes import Graded, Replies, Sampling, generate_replies
from aerorl_ops.eval_runner.replies import encode_observations, observation_prompts
from aerorl_ops.generation.batched import eos_token_ids
from aerorl_ops.generation.shown_video import media_kwargs, media_limits, shown_videos
from aerorl_ops.generation.vllm_engine import EngineVideo, MediaLimits
from aerorl_ops.models.end_of_turn import end_of_turn_id
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.step.per_token_inputs import OWN_INPUTS, per_token_names, token_typed_names
from aerorl_ops.rl.step.reply_sampler import ReplySampler
from aerorl_ops.rl.step.sequences import SequenceBatch, append_completions
from aerorl_ops.rows.task_item import TaskItem

PROBE = [{"role": "user", "content": [{"type": "text", "text": "?"}]},
         {"role": "assistant", "content": [{"type": "text", "text": "x"}]}]
"""A one-exchange conversation: what the chat template writes after it is an environment turn's tokens."""


def episode_limits(loaded: LoadedVLM, env: TaskEnv) -> MediaLimits:
    """The most images and videos one episode of ``env`` may show ``loaded``'s model, as a sampler's per-prompt
    limits: its items' most as shown (a video as images where the model takes no video: ``shown_video``), the
    images once per turn (an environment turn is taken to show no more images than the first turn)."""
    return media_limits(shown_videos(loaded, env.items), max_turns(env))


@dataclass(frozen=True)
class EnvTurn:
    """An environment's turn as the model reads it after a reply's end-of-turn token."""

    ids: tuple[int, ...]  # its tokens, image placeholders expanded as the processor expands them
    text: str  # the chat template's text of it (image placeholders as written)
    images: tuple[Image.Image, ...] = ()  # in placeholder order


def env_turn(loaded: LoadedVLM, observation: Observation) -> EnvTurn:
    """``observation`` as the user turn after a reply, followed by the next assistant header: the tokens the
    chat template writes after an assistant turn's end-of-turn token."""
    roles = tuple(message["role"] for message in observation.messages)
    parts = tuple(tuple((part.get("type", "text"), part.get("text", "")) for part in message["content"])
                  for message in observation.messages)
    images = sum(kind == "image" for message in parts for kind, _ in message)
    if observation.video:
        raise ValueError("an environment turn after the first shows a video; only an episode's first turn may "
                         "(show a later turn's frames as images)")
    if images != len(observation.images):
        raise ValueError(f"an environment turn shows {images} image placeholder(s) for {len(observation.images)} "
                         "image(s); give one {'type': 'image'} part per image, in order")
    end = end_of_turn_id(loaded.processor, loaded.source.label)
    text = _env_turn_text(loaded.processor, loaded.tokenizer, end, roles, parts)
    if not observation.images:
        return EnvTurn(_env_turn_ids(loaded.processor, loaded.tokenizer, end, roles, parts), text)
    encoded = loaded.processor(text=[text], images=[list(observation.images)], add_special_tokens=False)
    return EnvTurn(tuple(int(t) for t in encoded["input_ids"][0]), text, tuple(observation.images))


def _messages(roles: tuple[str, ...], parts: tuple[tuple[tuple[str, str], ...], ...]) -> list[dict]:
    return [{"role": role, "content": [{"type": "image"} if kind == "image" else {"type": "text", "text": text}
                                       for kind, text in message]}
            for role, message in zip(roles, parts, strict=True)]


@lru_cache(maxsize=64)
def _env_turn_ids(processor, tokenizer, end: int, roles: tuple[str, ...], parts) -> tuple[int, ...]:
    turn = _messages(roles, parts)
    before = tokenizer(processor.apply_chat_template(PROBE, tokenize=False), add_special_tokens=False).input_ids
    after = tokenizer(processor.apply_chat_template(PROBE + turn, add_generation_prompt=True, tokenize=False),
                      add_special_tokens=False).input_ids
    ends = [k for k, token in enumerate(before) if token == end]
    if not ends or after[:ends[-1] + 1] != before[:ends[-1] + 1]:
        raise ValueError(_NOT_A_CONTINUATION)
    return tuple(after[ends[-1] + 1:])


@lru_cache(maxsize=64)
def _env_turn_text(processor, tokenizer, end: int, roles: tuple[str, ...], parts) -> str:
    before = processor.apply_chat_template(PROBE, tokenize=False)
    after = processor.apply_chat_template(PROBE + _messages(roles, parts), add_generation_prompt=True,
                                          tokenize=False)
    marker = tokenizer.convert_ids_to_tokens(end)
    cut = before.rfind(marker)
    if cut < 0 or not after.startswith(before[:cut]):
        raise ValueError(_NOT_A_CONTINUATION)
    return after[cut + len(marker):]


_NOT_A_CONTINUATION = ("this model's chat template does not write an environment turn after a reply as a "
                       "continuation of the conversation; multi-turn episodes need one that does")


def encode_episodes(loaded: LoadedVLM, observations: Sequence[Observation], later: Sequence[Sequence[EnvTurn]]):
    """``encode_observations`` of each row's first observation, with the per-image tensors of all the row's
    images: the first observation's, then each of its later turns' (``later[row]``), in order. The
    processor builds those tensors from the rows' whole environment texts, so every family's layout
    (concatenated patches, per-row image stacks) comes out as its model expects."""
    inputs = encode_observations(loaded, observations)
    if not any(turn.images for turns in later for turn in turns):
        return inputs
    if token_typed_names(inputs) and not all(o.images for o in observations):
        raise ValueError("an environment turn shows an image in an episode whose first turn shows none: this "
                         "model types its image tokens, and multi-turn episodes take the types from the first "
                         "turn's prompt; show an image in the first turn")
    shown = shown_videos(loaded, observations)  # a first turn's video as the model takes it
    texts = [prompt + "".join(turn.text for turn in turns)
             for prompt, turns in zip(observation_prompts(loaded, shown), later, strict=True)]
    images = [list(o.images) + [image for turn in turns for image in turn.images]
              for o, turns in zip(shown, later, strict=True)]
    media = media_kwargs(loaded, texts, images, [o.video for o in shown], [o.video_fps for o in shown])
    whole = loaded.on_device(loaded.processor(text=texts, **media, return_tensors="pt", padding=True))
    per_token = (*OWN_INPUTS, *per_token_names(inputs))
    for name, value in whole.items():
        if name not in per_token:
            inputs[name] = value
    return inputs


def replayed_turns(loaded: LoadedVLM, env: TaskEnv, item: TaskItem, completion: Sequence[int]) -> list[EnvTurn]:
    """The environment turns inside ``completion`` (an episode of ``env`` on ``item``: replies and
    environment tokens, as ``sample_episodes`` wrote it), found by stepping the environment through its
    replies again. Each reply runs to its first end-of-turn or EOS token."""
    eos, end = eos_token_ids(loaded), end_of_turn_id(loaded.processor, loaded.source.label)
    stops = set(eos) | {end}
    state, _ = env.reset(item)
    turns, position = [], 0
    for turn in range(max_turns(env)):
        stop = next((k for k in range(position, len(completion)) if completion[k] in stops), len(completion) - 1)
        reply = list(completion[position:stop + 1])
        position = stop + 1
        text = loaded.tokenizer.decode(reply, skip_special_tokens=True).strip()
        result = env.step(state, Completion(text, tuple(t for t in reply if t not in eos)))
        if result.done or turn + 1 == max_turns(env) or position >= len(completion):
            break
        if reply[-1] != end and completion[position] == end:
            position += 1  # the end of turn the rollout wrote after a reply that did not
        written = env_turn(loaded, result.observation)
        if tuple(completion[position:position + len(written.ids)]) != written.ids:
            raise ValueError(f"environment {env.name!r}, item {item.item_id!r}: the completion does not hold the "
                             f"environment's turn {turn + 2} where a replay puts it; was it sampled from "
                             "this environment and model?")
        position += len(written.ids)
        turns.append(written)
        state = result.state
    return turns


def left_padded(batch: SequenceBatch) -> dict[str, torch.Tensor]:
    """``batch``'s model inputs with each row's tokens moved flush right (padding all on the left), so
    ``generate`` continues every row; per-image tensors as they are."""
    attention = batch.inputs["attention_mask"]  # [B, T]
    width = attention.shape[1]
    last = width - 1 - torch.flip(attention, dims=[1]).argmax(dim=1)  # [B] last real position
    shifts = (width - 1 - last).tolist()
    inputs = dict(batch.inputs)
    for name in (*OWN_INPUTS, *per_token_names(inputs)):  # the trailing padding wraps to the front
        inputs[name] = torch.stack([torch.roll(row, shift, dims=0) for row, shift in zip(inputs[name], shifts,
                                                                                          strict=True)])
    return inputs


@dataclass
class Episode:
    """One row's episode so far."""

    completion: list[int] = field(default_factory=list)  # replies and environment tokens
    action: list[bool] = field(default_factory=list)  # per completion token: the model's own
    turn_rewards: list[tuple[int, float]] = field(default_factory=list)  # (completion position, reward)
    reply_texts: list[str] = field(default_factory=list)
    later: list[EnvTurn] = field(default_factory=list)  # the environment's turns after the first
    text: str = ""  # the completion so far as the chat template writes it (image placeholders unexpanded)
    truncated: bool = False  # the last reply was cut at max_new_tokens
    correct: bool = False  # the environment's accuracy test at its last step
    components: dict[str, float] = field(default_factory=dict)
    prediction: str = ""


@dataclass(frozen=True)
class Episodes:
    """A part's episodes, as a rollout holds them."""

    replies: Replies  # completion ids (replies and environment tokens), the last reply's text, truncated
    graded: Graded  # rewards: the sum of each episode's turn rewards; correct at its last step
    actions: list[list[bool]]  # [B] per completion token: the model's own
    turn_rewards: list[list[tuple[int, float]]]  # [B] (completion position, reward) per turn
    turns: list[int]  # [B] replies written
    later: list[list[EnvTurn]]  # [B] the environment's turns after the first


def _generated(loaded: LoadedVLM, observations: Sequence[Observation], episodes: Sequence[Episode], turn: int,
               max_new_tokens: int, sampling: Sampling | None) -> Replies:
    """The episodes' next replies from the policy's ``generate``, each continuing its conversation's tokens."""
    prompts = encode_episodes(loaded, observations, [episode.later for episode in episodes])
    if turn == 0:
        return generate_replies(loaded, prompts, max_new_tokens, sampling)
    batch = append_completions(prompts, [episode.completion for episode in episodes], loaded)
    return generate_replies(loaded, left_padded(batch), max_new_tokens, sampling)


def _sampled(loaded: LoadedVLM, sampler: ReplySampler, observations: Sequence[Observation],
             episodes: Sequence[Episode], max_new_tokens: int, sampling: Sampling | None,
             seed: int | None) -> Replies:
    """The episodes' next replies from ``sampler``, one request each: its conversation so far as text (the first
    turn's prompt, then each reply and environment turn as written) with every image shown so far, in order."""
    shown = shown_videos(loaded, observations)  # a first turn's video as the model takes it
    prompts = [prompt + episode.text for prompt, episode in zip(observation_prompts(loaded, shown), episodes,
                                                                  strict=True)]
    images = [[*o.images, *(image for turn in episode.later for image in turn.images)]
              for o, episode in zip(shown, episodes, strict=True)]
    return Replies(*sampler.sample(prompts, images, max_new_tokens, sampling, n=1, seed=seed,
                                   videos=[EngineVideo(o.video, o.video_fps) for o in shown]))


def sample_episodes(loaded: LoadedVLM, env: TaskEnv, items: Sequence[TaskItem], max_new_tokens: int,
                    sampling: Sampling | None, sampler: ReplySampler | None = None,
                    seed: int | None = None) -> Episodes:
    """One episode per item (module docstring): sampled, or greedy when ``sampling`` is None; each turn's
    replies from ``sampler`` when given (a vLLM engine: turn t's request for item i seeded with
    ``seed + t * len(items) + i``), else from the policy's ``generate``."""
    eos, end = eos_token_ids(loaded), end_of_turn_id(loaded.processor, loaded.source.label)
    started = [env.reset(item) for item in items]
    states = [state for state, _ in started]
    observations = [observation for _, observation in started]
    episodes = [Episode() for _ in items]
    active = list(range(len(items)))
    for turn in range(max_turns(env)):
        shown, going = [observations[row] for row in active], [episodes[row] for row in active]
        if sampler is None:
            replies = _generated(loaded, shown, going, turn, max_new_tokens, sampling)
        else:
            replies = _sampled(loaded, sampler, shown, going, max_new_tokens, sampling,
                               None if seed is None else seed + turn * len(items))
        still = []
        for k, row in enumerate(active):
            ids, text, episode = replies.token_ids[k], replies.texts[k], episodes[row]
            result = env.step(states[row], Completion(text, tuple(t for t in ids if t not in eos)))
            episode.completion += ids
            episode.action += [True] * len(ids)
            episode.turn_rewards.append((len(episode.completion) - 1, result.reward))
            episode.reply_texts.append(text)
            episode.truncated = replies.truncated[k]
            episode.correct, episode.prediction = result.info.correct, result.info.prediction
            episode.components = dict(result.info.components)
            if result.done or turn + 1 == max_turns(env):
                continue
            closing = [] if ids and ids[-1] == end else [end]  # the reply's end of turn, when it did not write it
            written = env_turn(loaded, result.observation)
            episode.later.append(written)
            episode.text += loaded.tokenizer.decode(ids + closing, skip_special_tokens=False) + written.text
            tokens = closing + list(written.ids)
            episode.completion += tokens
            episode.action += [False] * len(tokens)
            states[row] = result.state
            still.append(row)
        active = still
        if not active:
            break
    names = sorted({name for episode in episodes for name in episode.components})
    graded = Graded(torch.tensor([sum(r for _, r in e.turn_rewards) for e in episodes], dtype=torch.float32),
                    torch.tensor([e.correct for e in episodes], dtype=torch.bool),
                    {name: torch.tensor([float(e.components.get(name, 0.0)) for e in episodes]) for name in names},
                    [e.prediction for e in episodes])
    return Episodes(Replies([e.completion for e in episodes], [e.reply_texts[-1] for e in episodes],
                            [e.truncated for e in episodes]), graded, [e.action for e in episodes],
                    [e.turn_rewards for e in episodes], [len(e.reply_texts) for e in episodes],
                    [e.later for e in episodes])


@dataclass(frozen=True)
class TwoTryReport:
    """A two-try environment's accuracies over ``n`` episodes (``envs.two_tries``)."""

    n: int
    first_try: float  # right at the first answer
    within_two_tries: float  # right at the first or the second
    revised: float  # of the wrong first answers, the share right at the second (0 when none was wrong)


def two_try_report(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], max_new_tokens: int,
                   sampling: Sampling | None, batch_size: int = 64) -> TwoTryReport:
    """Episodes of the items at ``indices`` (greedy when ``sampling`` is None), ``batch_size`` at a time, as a
    report."""
    items, first, within = items_at(env, indices), [], []
    for start in range(0, len(items), batch_size):
        episodes = sample_episodes(loaded, env, items[start:start + batch_size], max_new_tokens, sampling)
        first += episodes.graded.components["first_try_correct"].bool().tolist()
        within += episodes.graded.correct.tolist()
    wrong_first = len(first) - sum(first)
    revised = sum(w and not f for f, w in zip(first, within, strict=True))
    return TwoTryReport(len(first), sum(first) / len(first), sum(within) / len(within),
                        revised / wrong_first if wrong_first else 0.0)


def check_sharded_environment(settings: TrainingSettings, env: TaskEnv, ranks: int) -> None:
    """A sharded policy's rollouts must call ``generate`` as often on every rank, and a multi-turn
    environment's episodes end after different numbers of turns: ``ConfigError`` naming both."""
    if settings.sharding == "fsdp2" and ranks > 1 and max_turns(env) > 1:
        raise ConfigError(f'sharding = "fsdp2" cannot train on the multi-turn environment {env.name!r} yet (the '
                          'ranks would generate different numbers of turns): set sharding = "none"')
