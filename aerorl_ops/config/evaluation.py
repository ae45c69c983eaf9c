"""Evaluation settings (the ``[eval]`` table): what ``aerorl eval`` / the ``eval_run`` asset compares.

A model and its baseline answer the same ``n`` questions of a configured dataset at MAYE's three
sampling settings (``aerorl_ops.eval_metrics.sampling``): pass@``k`` from ``samples`` responses at
temperature 1.0, pass@1 at temperature 0.6, and pass@1 near-greedy (or plain greedy with
``greedy = true``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from aerorl_ops.config.fields import ConfigError, boolean, fail, integer, positive_int, setting, text, text_or_empty
from aerorl_ops.eval_metrics.sampling import MAYE_SAMPLING_SETTINGS, SamplingSetting

_text_or_empty = text_or_empty("empty = the dataset's own split")
FOLLOW_ALL, FOLLOW_FINAL, FOLLOW_EVERY = "all", "final", "every-"
EVERY_K = re.compile(r"every-[0-9]{1,18}")
"""``every-<k>``: k in ASCII digits, at most 18 of them (a 64-bit integer)."""


def follow_policy(where: str, setting_name: str, value: object) -> str:
    """``all``, ``final`` or ``every-<k>`` (k >= 1).

    >>> follow_policy("[eval]", "follow_checkpoints", "every-5")
    'every-5'
    """
    if isinstance(value, str) and (value in (FOLLOW_ALL, FOLLOW_FINAL) or (
            EVERY_K.fullmatch(value) and int(value.removeprefix(FOLLOW_EVERY)) >= 1)):
        return value
    raise fail(where, setting_name, f"must be \"all\", \"final\" or \"every-<k>\" (k >= 1, e.g. \"every-5\"), "
                                    f"got {value!r}")


def follows(policy: str, ordinal: int, final: bool) -> bool:
    """Whether the checkpoints sensor evaluates a run's ``ordinal``-th checkpoint (``final``: the run's last).

    >>> [follows("every-2", k, k == 5) for k in (1, 2, 3, 4, 5)], follows("final", 4, False)
    ([False, True, False, True, False], False)
    """
    if policy == FOLLOW_ALL:
        return True
    if policy == FOLLOW_FINAL:
        return final
    return ordinal % int(policy.removeprefix(FOLLOW_EVERY)) == 0


@dataclass(frozen=True)
class EvalSettings:
    """One model against a baseline on the same questions; the defaults are MAYE's settings."""

    model: str = setting("tiny-qwen2-vl", help="the evaluated model: a [models] key or a checkpoint directory",
                         check=text)
    baseline: str = setting("tiny-qwen2-vl", help="the model it is compared with: a [models] key or a checkpoint "
                            "directory", check=text)
    dataset: str = setting("easy_vqa", help="a [datasets] name: where the questions come from", check=text)
    split: str = setting("", help="split of the dataset (empty = the dataset's own split)", check=_text_or_empty)
    n: int = setting(500, help="questions, drawn with the dataset's seed; both models answer the same ones",
                     check=positive_int)
    samples: int = setting(8, help="responses per question at temperature 1.0 (pass@k needs samples >= k)",
                           check=positive_int)
    k: int = setting(8, help="k of the temperature-1.0 pass@k", check=positive_int)
    greedy: bool = setting(False, help="plain greedy decoding in place of the near-greedy setting "
                           "(temperature 0.01, top-p 0.001)", check=boolean)
    max_new_tokens: int = setting(16, help="maximum response length; a response that reaches it counts as clipped",
                                  check=positive_int)
    batch_size: int = setting(128, help="sequences per generate call (questions x responses per question)",
                              check=positive_int)
    seed: int = setting(0, help="seed of sampling and of the paired bootstrap", check=integer)
    resamples: int = setting(10000, help="paired-bootstrap resamples of each accuracy difference", check=positive_int)
    follow_checkpoints: str = setting(FOLLOW_FINAL, help="which checkpoints the checkpoint_evaluations sensor "
                                      "evaluates against their base model: \"all\", \"final\" (each run's last) "
                                      "or \"every-<k>\" (each run's k-th, 2k-th, ...)", check=follow_policy)

    def __post_init__(self) -> None:
        if self.k > self.samples:
            raise ConfigError(f"[eval]: k={self.k} exceeds samples={self.samples}; pass@k needs at least k responses "
                              "per question")

    def sampling_settings(self) -> tuple[SamplingSetting, ...]:
        """MAYE's three settings with this table's ``samples``, ``k`` and ``greedy``.

        >>> [s.name for s in EvalSettings(samples=16, greedy=True).sampling_settings()]
        ['high_temp_pass8', 'medium_temp_pass1', 'greedy_pass1']
        >>> EvalSettings(samples=16, k=4).sampling_settings()[0].label
        'pass@4 (n=16, temperature=1.0, top_p=1.0)'
        """
        high, medium, low = MAYE_SAMPLING_SETTINGS
        high = replace(high, n=self.samples, k=self.k)
        if high.k != 8:
            high = replace(high, name=f"high_temp_pass{self.k}")
        if self.greedy:
            low = SamplingSetting("greedy_pass1", greedy=True)
        return high, medium, low
