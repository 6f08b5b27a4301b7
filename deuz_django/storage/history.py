"""A run's history as rows: a message's encoding and digest, how much of a history is
stored already (so a save appends only what is new), and the rows of the rest."""

from __future__ import annotations

import hashlib

from ..core import Message
from ..core.durable.codec import decode_json, encode_json
from ..models import RunMessage
from . import writes as boundary_write


def encode_message(message: Message) -> str:
    return encode_json(message.to_json())


def digest(data: str) -> str:
    return hashlib.sha1(data.encode(), usedforsecurity=False).hexdigest()


def decode_message(data: str, path: str) -> Message:
    return Message.from_json(decode_json(data), path=path)


def common_prefix(previous: tuple[Message, ...], messages: tuple[Message, ...]) -> int:
    """How many leading messages equal the remembered ones (identity first, then value)."""
    shared = min(len(previous), len(messages))
    if previous[:shared] == messages[:shared]:  # tuple equality short-cuts on identity
        return shared
    for index in range(shared):
        if (
            previous[index] is not messages[index]
            and previous[index] != messages[index]
        ):
            return index
    return shared


def stored_prefix(pk: int, messages: tuple[Message, ...]) -> int:
    """How many leading messages are stored unchanged, judged by the stored digests."""
    stored = RunMessage.objects.filter(run_id=pk).order_by("index")
    index = 0
    for stored_digest in stored.values_list("digest", flat=True):
        if index >= len(messages):
            return index
        if digest(encode_message(messages[index])) != stored_digest:
            return index
        index += 1
    return index


def insert_messages(pk: int, messages: tuple[Message, ...], start: int) -> None:
    """The run's messages from ``start`` on, as rows (the ORM's path; the common append
    is :mod:`.boundary_write`'s)."""
    RunMessage.objects.bulk_create(
        [
            RunMessage(run_id=pk, index=i, role=r, data=d, digest=h)
            for i, r, d, h in message_rows(messages, start)
        ],
        batch_size=500,
    )


def message_rows(
    messages: tuple[Message, ...], start: int
) -> list[boundary_write.MessageRow]:
    """``(index, role, data, digest)`` of the messages from ``start`` on."""
    rows: list[boundary_write.MessageRow] = []
    for index in range(start, len(messages)):
        data = encode_message(messages[index])
        rows.append((index, messages[index].role, data, digest(data)))
    return rows
