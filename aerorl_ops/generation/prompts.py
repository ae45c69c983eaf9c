"""The benchmark prompt: a row's own prompt (its dataset's instruction), else the question plus a
strict-JSON answer contract."""

from __future__ import annotations

from aerorl_ops.rows.task_item import TaskItem, prompt_text

ANSWER_INSTRUCTION = 'Answer with strict JSON of the form {"answer": "<answer>"} and nothing else.'


def user_prompt(question: str) -> str:
    """The user text sent with the image (what replay records store as ``prompt``)."""
    return f"{question.strip()}\n{ANSWER_INSTRUCTION}"


def row_prompt(question: str, prompt: str = "") -> str:
    """The user text of a row: its own ``prompt`` when it has one, else :func:`user_prompt`.

    >>> row_prompt("What shape?", "What shape?\nAnswer with one word."), row_prompt("Total?")[:7]
    ('What shape?\nAnswer with one word.', 'Total?\n')
    """
    return prompt.strip() or user_prompt(question)


def item_prompt(item: TaskItem) -> str:
    """The user text the benchmark shows with an item's image: the text of its messages, else
    :func:`user_prompt` (an item read without an environment has no messages)."""
    return row_prompt(item.question, prompt_text(item))


def chat_messages(question: str, prompt: str = "") -> list[dict]:
    """One user turn holding the image placeholder and the row's prompt, in chat-template form."""
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": row_prompt(question, prompt)}]}]
