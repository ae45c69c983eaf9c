"""How a measured number is shown to a person: rounded to four significant digits.

Shown, not stored: the Dagster metadata and ``aerorl sql``'s table round; DuckDB, ``--csv`` and
``--json`` keep every digit. Rounding keeps a plain number (``123456.7`` -> ``123500.0``, never
``1.235e+05``), so the UI still plots a metadata value across materializations.
"""

from __future__ import annotations

SIGNIFICANT_DIGITS = 4


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` rounded to ``digits`` significant digits (NaN and infinities unchanged).

    >>> significant(0.006944444444444444)
    0.006944
    >>> significant(123456.7)
    123500.0
    >>> significant(-2.0 / 3.0)
    -0.6667
    """
    return float(f"{value:.{digits}g}")
