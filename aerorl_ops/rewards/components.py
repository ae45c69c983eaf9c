"""AeroRL's four reward components, each a small callable with its settings as fields.

Each component scores one ``RewardContext`` (the reference behaviour). The columnar engine
scores a whole replay table at once with one kernel per component type
(``aerorl_ops.rewards.columnar.kernels.COLUMN_KERNELS``); both give the same floats. Scores
lie in [-1, 1]. Default settings are AeroRL's (``aerorl_compat.AERORL_REWARDS``); each component
reports under its name from ``config.rewards.REWARD_COMPONENT_NAMES``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from aerorl_ops.aerorl_compat import AERORL_REWARDS
from aerorl_ops.config.rewards import COST, FORMAT, GROUNDING, VERIFIER
from aerorl_ops.rewards.context import RewardContext, RewardResult
from aerorl_ops.rewards.normalize import clip_score, entity_aliases, reference_candidates, word_count

JSON_PENALTY = 1.3
REGEX_PENALTY = 0.5


@dataclass(slots=True)
class FormatReward:
    """Starts at 1; -1.3 when JSON is required and the response is not JSON; -0.5 when
    ``regex_pattern`` is set and ``re.search`` finds nothing; clipped to [-1, 1].

    >>> FormatReward(require_json=True)(RewardContext("p", '{"answer": 1}')).score
    1.0
    >>> FormatReward(require_json=True, regex_pattern=r"^\\{")(RewardContext("p", "cat")).score
    -0.8
    """

    require_json: bool = AERORL_REWARDS.require_json
    regex_pattern: str | None = AERORL_REWARDS.regex_pattern
    name: str = FORMAT

    def __call__(self, context: RewardContext) -> RewardResult:
        score = 1.0
        details: dict[str, Any] = {}
        if self.require_json:
            valid = is_json(context.response)
            details["json_valid"] = valid
            if not valid:
                score -= JSON_PENALTY
        if self.regex_pattern:
            matched = re.search(self.regex_pattern, context.response) is not None
            details["regex_matched"] = matched
            if not matched:
                score -= REGEX_PENALTY
        return RewardResult(name=self.name, score=clip_score(score), details=details)


def is_json(text: str) -> bool:
    """Whether ``json.loads`` accepts ``text`` (the format reward's JSON test).

    >>> is_json('{"a": [1, 2]}'), is_json("{'a': 1}")
    (True, False)
    """
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


@dataclass(slots=True)
class VerifierReward:
    """Checks the response against every reference alias, case-insensitively by default.

    1.0 when the stripped response equals an alias, 0.5 when it contains one, -0.5
    otherwise, 0.0 when there is no reference.

    >>> VerifierReward()(RewardContext("p", " STOP ", reference=["halt", "stop"])).score
    1.0
    >>> VerifierReward()(RewardContext("p", "it says stop", reference="Stop")).score
    0.5
    >>> VerifierReward()(RewardContext("p", "go", reference="stop")).score
    -0.5
    >>> VerifierReward()(RewardContext("p", "go")).score
    0.0
    """

    case_sensitive: bool = False
    name: str = VERIFIER

    def __call__(self, context: RewardContext) -> RewardResult:
        references = reference_candidates(context.reference)
        if not references:
            return RewardResult(name=self.name, score=0.0, details={"reason": "missing_reference"})
        response = context.response.strip()
        if not self.case_sensitive:
            response = response.lower()
        exact = False
        contains = False
        matched_reference = ""
        for reference in references:
            candidate = reference if self.case_sensitive else reference.lower()
            if response == candidate:
                exact = True
                contains = True
                matched_reference = reference
                break
            if candidate in response and not contains:
                contains = True
                matched_reference = reference
        score = 1.0 if exact else (0.5 if contains else -0.5)
        return RewardResult(
            name=self.name,
            score=score,
            details={
                "exact_match": exact,
                "contains_reference": contains,
                "matched_reference": matched_reference,
                "reference_count": len(references),
            },
        )


@dataclass(slots=True)
class GroundingReward:
    """2 * precision - 1 of the claimed entities against the evidence entities.

    An entity is supported when any of its aliases (see ``entity_aliases``) is an alias
    of some evidence entity. No claimed entities scores 0.

    >>> meta = {"evidence_entities": ["42", "Mr. Alm"], "claimed_entities": ["42%", "mr alm", "Bob"]}
    >>> round(GroundingReward()(RewardContext("p", "r", metadata=meta)).score, 6)
    0.333333
    """

    name: str = GROUNDING

    def __call__(self, context: RewardContext) -> RewardResult:
        evidence_entities = context.metadata.get("evidence_entities", [])
        claimed_entities = context.metadata.get("claimed_entities", [])
        evidence = [aliases for aliases in map(entity_aliases, evidence_entities) if aliases]
        claimed = [aliases for aliases in map(entity_aliases, claimed_entities) if aliases]
        if not claimed:
            return RewardResult(name=self.name, score=0.0, details={"reason": "no_claimed_entities"})
        supported = frozenset().union(*evidence)
        overlap = sum(1 for aliases in claimed if not aliases.isdisjoint(supported))
        precision = overlap / max(len(claimed), 1)
        return RewardResult(
            name=self.name,
            score=clip_score(2.0 * precision - 1.0),
            details={
                "claimed": len(claimed),
                "evidence": len(evidence),
                "overlap": overlap,
                "precision": round(precision, 4),
            },
        )


@dataclass(slots=True)
class CostReward:
    """1 minus the relative overrun of words over ``target_tokens`` and of latency over
    ``latency_budget_ms``, clipped to [-1, 1].

    >>> CostReward(target_tokens=2, latency_budget_ms=100)(
    ...     RewardContext("p", "three short words", metadata={"latency_ms": 150})).score
    0.0
    """

    target_tokens: int = AERORL_REWARDS.target_tokens
    latency_budget_ms: float = AERORL_REWARDS.latency_budget_ms
    name: str = COST

    def __call__(self, context: RewardContext) -> RewardResult:
        token_count = word_count(context.response)
        latency_ms = float(context.metadata.get("latency_ms", 0.0))
        token_ratio = token_count / max(self.target_tokens, 1)
        latency_ratio = latency_ms / max(self.latency_budget_ms, 1.0)
        penalty = max(0.0, token_ratio - 1.0) + max(0.0, latency_ratio - 1.0)
        return RewardResult(
            name=self.name,
            score=clip_score(1.0 - penalty),
            details={
                "token_count": token_count,
                "latency_ms": latency_ms,
                "target_tokens": self.target_tokens,
                "latency_budget_ms": self.latency_budget_ms,
            },
        )
