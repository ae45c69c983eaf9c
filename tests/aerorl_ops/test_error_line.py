"""``aerorl_ops.error_line``: an exception's message on one line, or its class name."""

from __future__ import annotations

import doctest

import aerorl_ops.error_line as error_line_module
from aerorl_ops.error_line import error_line


def test_a_multi_line_message_is_one_line_and_an_empty_one_names_the_class():
    assert error_line(OSError("cannot read\n\tconfig.json:  no such file")) == "cannot read config.json: no such file"
    assert error_line(RuntimeError("")) == "RuntimeError"
    result = doctest.testmod(error_line_module)
    assert result.failed == 0 and result.attempted > 0
