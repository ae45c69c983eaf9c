"""Numbers shown to a person: four significant digits, a plain number, never a string."""

import doctest
import math

from aerorl_ops.text import numbers
from aerorl_ops.text.numbers import significant


def test_four_significant_digits_by_hand():
    assert significant(0.006944444444444444) == 0.006944  # 1/144
    assert significant(123456.7) == 123500.0  # rounded, not 1.235e+05
    assert significant(2 / 3) == 0.6667
    assert significant(12.0) == 12.0
    assert significant(-0.000123456) == -0.0001235
    assert significant(0.0) == 0.0


def test_nan_and_infinities_pass_through():
    assert math.isnan(significant(math.nan))
    assert significant(math.inf) == math.inf and significant(-math.inf) == -math.inf


def test_the_docstring_examples_hold():
    assert doctest.testmod(numbers).failed == 0
