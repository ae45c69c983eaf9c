"""An exception's message on one line, and any text as one printable line, for errors that name their input
in one line.

>>> error_line(ValueError("no such\\n  file")), error_line(KeyError())
('no such file', 'KeyError')
"""

from __future__ import annotations


def error_line(error: BaseException) -> str:
    """``error``'s message with its whitespace runs (newlines included) made single spaces; its class name
    when the message is empty."""
    return " ".join(str(error).split()) or type(error).__name__


def printable_line(text: str) -> str:
    r"""``text`` with every character that is not printable (line breaks, controls, lone surrogates) written as
    its Python escape, so that it is one line however it was made.

    >>> printable_line("image file not found: /data/a\r\nb.png")
    'image file not found: /data/a\\r\\nb.png'
    """
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


MAX_LINE_CHARS = 2_000
"""The longest line :func:`shortened` leaves whole: an error quoting a 50,000-character value stays readable."""


def shortened(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text``; when longer than ``limit``, its start and end with how many characters were left out between.

    >>> shortened("a" * 10 + "b" * 10, limit=6)
    'aaaa …[14 characters left out]… bb'
    """
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]} …[{len(text) - head - tail} characters left out]… {text[-tail:]}"
