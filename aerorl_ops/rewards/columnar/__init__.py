"""The columnar engine: ``evaluate_table`` scores a replay table column by column with the same
numbers as the per-record stack (``aerorl_ops.rewards.evaluate``).

- ``evaluate``: ``evaluate_table``, with a record-by-record fallback for components without a kernel;
- ``kernels``: one kernel per built-in component type (``COLUMN_KERNELS``);
- ``columns``: a replay table dictionary-encoded for scoring; ``keys``: row/key helpers on NumPy;
- ``text_columns`` / ``alias_columns``: the string rules of ``normalize`` on whole columns.

This package imports the per-record modules of ``aerorl_ops.rewards``; they never import it.
"""

from aerorl_ops.rewards.columnar.evaluate import evaluate_table

__all__ = ["evaluate_table"]
