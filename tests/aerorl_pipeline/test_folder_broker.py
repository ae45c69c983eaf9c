"""The Celery folder broker puts and takes each message whole (``aerorl_pipeline.folder_broker``).

kombu's own filesystem transport creates a message's file before it writes it: a consumer that looks in between
takes an empty message and dies of it (kombu issue #1551), and the step it carried is lost. The test makes a
consumer look at exactly that moment, for kombu's channel (the bug, shown) and for the project's (none).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from queue import Empty

import pytest

kombu = pytest.importorskip("kombu", reason="kombu comes with the scale-out extra: pip install -e '.[distributed]'")

from kombu.transport import filesystem  # noqa: E402

from aerorl_ops.config.scale_out import ExecutorSettings  # noqa: E402
from aerorl_pipeline import folder_broker  # noqa: E402
from aerorl_pipeline.executors import celery_app  # noqa: E402


def channel(folder: Path, transport: type) -> filesystem.Channel:
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "processed_folder": str(folder),
               "control_folder": str(folder)}
    return kombu.Connection("filesystem://", transport=transport, transport_options=options).channel()


def take_while_putting(folder: Path, transport: type, module, monkeypatch: pytest.MonkeyPatch) -> list:
    """Put one message on queue ``q`` while a second consumer takes from ``q`` as the message's bytes are made
    (after its file may exist, before it is written); what that consumer got (or raised), then what is left."""
    producer, consumer = channel(folder, transport), channel(folder, transport)
    seen: list = []
    make = module.dumps

    def dumps_then_look(payload):
        try:
            seen.append(consumer._get("q"))
        except Empty:
            seen.append("empty queue")
        except json.JSONDecodeError as error:
            seen.append(error)
        return make(payload)

    monkeypatch.setattr(module, "dumps", dumps_then_look)
    producer._put("q", {"step": "generations"})
    monkeypatch.setattr(module, "dumps", make)
    try:
        seen.append(consumer._get("q"))
    except Empty:
        seen.append("empty queue")
    return seen


def test_kombus_channel_hands_a_consumer_the_empty_file_of_a_message_being_put(tmp_path, monkeypatch):
    seen = take_while_putting(tmp_path, filesystem.Transport, filesystem, monkeypatch)
    assert isinstance(seen[0], json.JSONDecodeError)  # the worker dies of it ("Unrecoverable error")
    assert seen[1] == "empty queue"  # and the message is gone


def test_a_message_is_seen_only_once_written_and_taken_once(tmp_path, monkeypatch):
    seen = take_while_putting(tmp_path, folder_broker.Transport, folder_broker, monkeypatch)
    assert seen == ["empty queue", {"step": "generations"}]
    assert list(tmp_path.iterdir()) == []  # taken: nothing left, claimed or written


def test_consumers_racing_for_messages_take_each_exactly_once(tmp_path):
    producer = channel(tmp_path, folder_broker.Transport)
    for index in range(200):
        producer._put("q", {"index": index})
    taken: list[int] = []

    def consume() -> None:
        mine = channel(tmp_path, folder_broker.Transport)
        while True:
            try:
                taken.append(mine._get("q")["index"])
            except Empty:
                return

    consumers = [threading.Thread(target=consume) for _ in range(4)]
    for thread in consumers:
        thread.start()
    for thread in consumers:
        thread.join(timeout=60)
    assert sorted(taken) == list(range(200))


def test_the_folder_broker_app_names_this_transport(tmp_path):
    app = celery_app(ExecutorSettings(kind="celery", celery_dir=str(tmp_path)))
    assert app.config_source["broker_transport"] == "aerorl_pipeline.folder_broker:Transport"
    connection = kombu.Connection(app.broker, transport=app.config_source["broker_transport"])  # as Celery makes it
    assert connection.get_transport_cls() is folder_broker.Transport


def test_the_docstring_examples_hold():
    import doctest

    result = doctest.testmod(folder_broker)
    assert result.attempted > 0 and result.failed == 0
