"""The folder broker of ``[executor] kind = "celery"`` without a broker URL: kombu's ``filesystem://`` transport,
with each message put and taken whole.

kombu's own transport (5.7) creates a message's file, then locks it and writes it; a consumer takes any file of
its queue by moving it (no lock) and reads it. A worker that lists the folder between the create and the write
reads an empty message, and dies of it (``JSONDecodeError``, "Unrecoverable error"; kombu issue #1551) with the
step it was sent lost: the partition's run then waits forever for a step nobody runs. A chaos run hit it with
two partition workers under load, without any kill. Here a message is written under a hidden name and renamed
into the queue (a rename is atomic within a folder), and a consumer claims a message by renaming it to a hidden
name of its own in the same folder, so two consumers never both take it, whatever folder ``/tmp`` is on.

Celery finds the transport through ``broker_transport`` (``aerorl_pipeline.executors.celery_app``).
"""

from __future__ import annotations

import os
import uuid
from queue import Empty
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

TRANSPORT = f"{__name__}:Transport"
"""The ``broker_transport`` setting naming this transport."""


def message_name(queue: str) -> str:
    """kombu's name for a new message of ``queue``: its order (milliseconds), a unique id, the queue."""
    return f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"


def hidden(name: str, why: str) -> str:
    """A name no queue's listing takes for a message (kombu reads ``<anything>.<queue>.msg`` only).

    >>> hidden("12_ab.dagster.msg", "claimed-7").partition(".")[2] == "dagster.msg"
    False
    """
    return f".{why}.{name}"


class Channel(filesystem.Channel):
    """kombu's filesystem channel, its messages put and taken whole (module docstring)."""

    def _put(self, queue, payload, **kwargs):
        name = message_name(queue)
        final = os.path.join(self.data_folder_out, name)
        temporary = os.path.join(self.data_folder_out, hidden(name, "writing"))
        try:
            with open(temporary, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as error:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from error

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            source = os.path.join(self.data_folder_in, name)
            claimed = os.path.join(self.data_folder_in, hidden(name, f"claimed-{os.getpid()}"))
            try:
                os.rename(source, claimed)  # only one consumer's rename finds the file
            except OSError:
                continue  # another consumer took it
            try:
                with open(claimed, "rb") as file:
                    payload = file.read()
                if self.store_processed:
                    os.replace(claimed, os.path.join(self.processed_folder, name))
                else:
                    os.remove(claimed)
            except OSError as error:
                raise filesystem.ChannelError(f"Cannot read file {claimed!r} from queue.") from error
            return loads(bytes_to_str(payload))
        raise Empty()


class Transport(filesystem.Transport):
    """kombu's filesystem transport with :class:`Channel`."""

    Channel = Channel
