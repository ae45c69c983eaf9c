"""An exception's message on one line, for errors that name their input in one line.

>>> error_line(ValueError("no such\\n  file")), error_line(KeyError())
('no such file', 'KeyError')
"""

from __future__ import annotations


def error_line(error: BaseException) -> str:
    """``error``'s message with its whitespace runs (newlines included) made single spaces; its class name
    when the message is empty."""
    return " ".join(str(error).split()) or type(error).__name__
