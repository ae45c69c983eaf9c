"""The judge reward: a configured model grades (question, reference answers, response) triples.

``JudgeScorer.scores(triples)`` is the batch API both the benchmark (``rewards.judge_table``) and
training (``envs.judged``) call. It looks every distinct triple up in a grade cache first (the
DuckDB ``judge_grades`` table, ``scoring.judge_cache``, or an in-memory one), then asks the judge
for the rest in batches of ``batch_size`` (one ``generate`` call each, greedy), renders each
prompt from ``template``, and parses each reply with ``judge_parse.parse_grade``. A grade that
cannot be had scores ``failure_score`` and is counted, never silently zero:

- ``unparsable``: the reply holds no grade by that rule (stored, with the raw reply; greedy, so a
  cached unparsable grade is reused and counted again as a failure);
- ``timeout``: the call's wall time passed ``timeout_s`` before the triple's reply finished (a batch
  not started by then, or a reply the judge cut off at the deadline). Stored with its status, but
  never reused: the next scoring asks again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from aerorl_ops.config.judge import JudgeSettings
from aerorl_ops.rewards.judge_parse import parse_grade

OK = "ok"
UNPARSABLE = "unparsable"
TIMEOUT = "timeout"
REUSABLE = (OK, UNPARSABLE)
"""Statuses a cached grade is reused with (a timeout is asked again)."""
NO_REFERENCE = "(none)"


@dataclass(frozen=True)
class JudgeTriple:
    """What the judge grades: the question as the model saw it, the accepted answers, the reply."""

    question: str
    reference: tuple[str, ...]
    response: str


@dataclass(frozen=True)
class JudgeReply:
    """One reply of the judge; ``finished``: it ended (EOS or ``max_new_tokens``), not cut off by time."""

    text: str
    finished: bool = True


class JudgeModel(Protocol):
    """What grades: ``key`` (its ``[models]`` key), ``identity`` (its weights), and a batched generate."""

    key: str
    identity: str

    def generate(self, prompts: Sequence[str], max_new_tokens: int, max_time_s: float) -> list[JudgeReply]: ...


@dataclass(frozen=True)
class JudgeGrade:
    """One triple's grade: ``score`` in [0, 1] when ``status`` is ok, else None."""

    score: float | None
    raw_reply: str
    status: str


@dataclass(frozen=True)
class CacheScope:
    """Which judge and which template the cached grades belong to."""

    judge_key: str
    judge_identity: str
    template_sha256: str


class GradeCache(Protocol):
    def lookup(self, scope: CacheScope, triples: Sequence[JudgeTriple]) -> dict[JudgeTriple, JudgeGrade]: ...

    def store(self, scope: CacheScope, grades: Mapping[JudgeTriple, JudgeGrade]) -> None: ...


@dataclass
class MemoryGradeCache:
    """A grade cache that lives as long as the object (training's default)."""

    grades: dict[tuple[CacheScope, JudgeTriple], JudgeGrade] = field(default_factory=dict)

    def lookup(self, scope: CacheScope, triples: Sequence[JudgeTriple]) -> dict[JudgeTriple, JudgeGrade]:
        found = {triple: self.grades.get((scope, triple)) for triple in triples}
        return {triple: grade for triple, grade in found.items() if grade is not None and grade.status in REUSABLE}

    def store(self, scope: CacheScope, grades: Mapping[JudgeTriple, JudgeGrade]) -> None:
        self.grades.update(((scope, triple), grade) for triple, grade in grades.items())


@dataclass(frozen=True)
class JudgedScores:
    """The judge's scores of a batch of triples, in order, and what it cost.

    ``failures`` counts unparsable and timed-out triples (``timeouts`` the latter), each scored
    ``failure_score``; ``cached`` the triples graded from the cache; ``calls`` the generate calls.
    """

    scores: tuple[float, ...]
    statuses: tuple[str, ...]
    failures: int
    timeouts: int
    cached: int
    calls: int


def template_sha256(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()


def judge_prompt(template: str, triple: JudgeTriple) -> str:
    """``template`` filled in; the accepted answers joined by `` | `` (``(none)`` without any).

    >>> judge_prompt("{question} [{reference}] {response}", JudgeTriple("Colour?", ("red", "crimson"), "Red"))
    'Colour? [red | crimson] Red'
    """
    reference = " | ".join(triple.reference) or NO_REFERENCE
    return template.format(question=triple.question, reference=reference, response=triple.response)


@dataclass
class JudgeScorer:
    """Grades triples with ``judge`` as ``settings`` say, through ``cache``; ``clock`` measures the timeout."""

    judge: JudgeModel
    settings: JudgeSettings
    cache: GradeCache = field(default_factory=MemoryGradeCache)
    clock: Callable[[], float] = time.monotonic

    @property
    def scope(self) -> CacheScope:
        return CacheScope(self.judge.key, self.judge.identity, template_sha256(self.settings.template))

    def scores(self, triples: Sequence[JudgeTriple]) -> JudgedScores:
        """Each triple's score (its grade, or ``failure_score``), with the failures and cache hits counted."""
        scope = self.scope
        distinct = list(dict.fromkeys(triples))
        known = self.cache.lookup(scope, distinct) if distinct else {}
        fresh, calls = self.grade([triple for triple in distinct if triple not in known])
        if fresh:
            self.cache.store(scope, fresh)
        grades = [known.get(triple) or fresh[triple] for triple in triples]
        failure = self.settings.failure_score
        return JudgedScores(
            scores=tuple(grade.score if grade.status == OK else failure for grade in grades),
            statuses=tuple(grade.status for grade in grades),
            failures=sum(grade.status != OK for grade in grades),
            timeouts=sum(grade.status == TIMEOUT for grade in grades),
            cached=sum(triple in known for triple in triples),
            calls=calls,
        )

    def grade(self, triples: Sequence[JudgeTriple]) -> tuple[dict[JudgeTriple, JudgeGrade], int]:
        """Ask the judge about ``triples`` in batches until ``timeout_s`` has passed; (grades, generate calls)."""
        settings = self.settings
        graded: dict[JudgeTriple, JudgeGrade] = {}
        calls = 0
        started = self.clock()
        for start in range(0, len(triples), settings.batch_size):
            batch = triples[start: start + settings.batch_size]
            left = settings.timeout_s - (self.clock() - started)
            if left <= 0:
                graded.update((triple, JudgeGrade(None, "", TIMEOUT)) for triple in batch)
                continue
            replies = self.judge.generate([judge_prompt(settings.template, t) for t in batch],
                                          settings.max_new_tokens, left)
            calls += 1
            if len(replies) != len(batch):
                raise RuntimeError(f"judge {self.judge.key!r} returned {len(replies)} replies to {len(batch)} prompts")
            late = self.clock() - started > settings.timeout_s
            for triple, reply in zip(batch, replies, strict=True):
                graded[triple] = graded_reply(reply, late)
        return graded, calls


def graded_reply(reply: JudgeReply, late: bool) -> JudgeGrade:
    """A reply's grade: timed out when its batch ended ``late`` and it was cut off, else parsed.

    >>> graded_reply(JudgeReply("7"), late=False), graded_reply(JudgeReply("7", finished=False), late=True).status
    (JudgeGrade(score=0.7, raw_reply='7', status='ok'), 'timeout')
    """
    if late and not reply.finished:
        return JudgeGrade(None, reply.text, TIMEOUT)
    score = parse_grade(reply.text)
    return JudgeGrade(score, reply.text, OK if score is not None else UNPARSABLE)
