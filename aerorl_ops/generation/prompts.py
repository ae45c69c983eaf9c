"""The benchmark prompt: the question plus a strict-JSON answer contract."""

from __future__ import annotations

ANSWER_INSTRUCTION = 'Answer with strict JSON of the form {"answer": "<answer>"} and nothing else.'


def user_prompt(question: str) -> str:
    """The user text sent with the image (what replay records store as ``prompt``)."""
    return f"{question.strip()}\n{ANSWER_INSTRUCTION}"


def chat_messages(question: str) -> list[dict]:
    """One user turn holding the image placeholder and the prompt, in chat-template form."""
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": user_prompt(question)}]}]
