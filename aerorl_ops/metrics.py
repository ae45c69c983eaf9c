"""The standard per-sample metrics of DocVQA (ANLS) and ChartQA (relaxed accuracy).

Both give exactly lmms-eval's per-sample scores:

- ANLS (Biten et al., 2019, "Scene Text Visual Question Answering"): both strings are
  stripped, lower-cased and whitespace-collapsed, their Levenshtein distance is divided
  by the larger *raw* length (``len(s.upper())``, before normalisation, as lmms-eval
  does), the best reference wins, and a similarity below ``threshold`` scores 0.
- Relaxed accuracy (Methani et al., 2020; ChartQA, Masry et al., 2022): a numeric
  answer within 5% relative error of a nonzero numeric target is right; anything else
  needs a case-insensitive exact match. A trailing ``%`` reads as hundredths.
"""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz.distance import Levenshtein

# When a score counts as "correct", shared by the summary row and the report views.
VERIFIER_CORRECT = 0.5  # AeroRL's verifier gives 1.0 exact, 0.5 contained, -0.5 wrong
ANLS_CORRECT = 0.5
RELAXED_ACCURACY_CORRECT = 1.0  # ChartQA relaxed accuracy is 0 or 1

# The benchmark_summary metrics compared from run to run (the trends view and the regression check).
TREND_METRICS = ("samples_per_s", "pass_rate", "accuracy", "latency_p95_ms", "average_reward")


def _anls_text(text: str) -> str:
    return " ".join(text.strip().lower().split())


def anls(prediction: str, references: Sequence[str] | str, threshold: float = 0.5) -> float:
    """Average Normalized Levenshtein Similarity of one prediction against its references.

    >>> anls("Paris", ["paris", "Paris, France"])
    1.0
    >>> anls("abcd", ["abef"])  # distance 2 over length 4: similarity 0.5 is kept
    0.5
    >>> anls("abcde", ["vwxyz"])
    0.0
    >>> anls("", [""])
    1.0
    """
    if isinstance(references, str):
        references = [references]
    if not references:
        raise ValueError("anls needs at least one reference")
    predicted = _anls_text(prediction)
    predicted_length = len(prediction.upper())
    distances = []
    for reference in references:
        length = max(len(reference.upper()), predicted_length)
        distance = Levenshtein.distance(_anls_text(reference), predicted)
        distances.append(0.0 if length == 0 else float(distance) / float(length))
    similarity = 1 - min(distances)
    return 0.0 if similarity < threshold else float(similarity)


def _relaxed_float(text: str) -> float | None:
    try:
        if text.endswith("%"):
            return float(text.rstrip("%")) / 100.0
        return float(text)
    except ValueError:
        return None


def relaxed_accuracy(prediction: str, target: str, tolerance: float = 0.05) -> float:
    """1.0 when ``prediction`` matches ``target`` under ChartQA's relaxed rule, else 0.0.

    >>> relaxed_accuracy("10.4", "10"), relaxed_accuracy("10.6", "10")
    (1.0, 0.0)
    >>> relaxed_accuracy("0.12", "12%"), relaxed_accuracy("12%", "12")
    (1.0, 0.0)
    >>> relaxed_accuracy("Yes", "yes"), relaxed_accuracy("1,234", "1234")
    (1.0, 0.0)
    """
    predicted = _relaxed_float(prediction)
    expected = _relaxed_float(target)
    if predicted is not None and expected:
        return 1.0 if abs(predicted - expected) / abs(expected) <= tolerance else 0.0
    return 1.0 if prediction.lower() == target.lower() else 0.0
