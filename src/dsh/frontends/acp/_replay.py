"""The frames of a ``session/load`` replay, made a batch at a time (issue #12 item 5).

A big session is nearly all text chunks, in runs of one step each: a run's frames differ only by their text, so
they are assembled around each chunk's stored JSON text (:attr:`~dsh.services.sessions.ChunkEvent.text_json`)
with the step's constant parts, without a call per chunk. Every other event goes through the projection as
before.

Guarantees:

* The frames are exactly those the event-by-event replay sends (:func:`~._projection.encode_chunk_frame` for a
  text chunk, the projection's updates for anything else), byte for byte and in order: one frame per chunk,
  never merged (``tests/acp_durable/test_replay_property.py``, ``tests/test_acp_projection.py``).
* Frames are made a batch of at most *batch* events at a time, so the caller can send them, wait for the
  writer and make the next batch: a replay never holds more than one batch of frames of its own.

Not here: sending, waiting for the writer (the front end's ``load_session`` does both between batches).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby, repeat

from dsh.frontends.acp._projection import _CHUNK_FRAMES
from dsh.services.sessions import SessionEvent

__all__ = ["replay_frames"]

_TEXT_JSON = operator.attrgetter("text_json")


def replay_frames(
    events: Sequence[SessionEvent],
    prefix: bytes,
    frames_of: Callable[[SessionEvent], list[bytes]],
    batch: int,
) -> Iterator[list[bytes]]:
    """The replay's frames, in order, as one list per *batch* events. *prefix* is the session's frame prefix
    (:func:`~._projection.update_frame_prefix`); *frames_of* gives the frames of any event that is not a
    :class:`~dsh.services.sessions.ChunkEvent` (those are recognised by their ``where``)."""
    places = list(map(getattr, events, repeat("where"), repeat(None)))  # None: not a text chunk
    for start in range(0, len(events), batch):
        frames: list[bytes] = []
        for where, group in groupby(range(start, min(start + batch, len(events))), places.__getitem__):
            indexes = list(group)
            if where is None:
                for index in indexes:
                    frames.extend(frames_of(events[index]))
                continue
            turn, step, kind = where
            head, middle = _CHUNK_FRAMES[kind]
            before, after = prefix + head, b'%s%d.%d"}}}' % (middle, turn, step)
            frames += [before + text + after for text in map(_TEXT_JSON, events[indexes[0] : indexes[-1] + 1])]
        yield frames
