"""The reader turns bytes into events, as h11 does, and knows nothing of answering.

A :class:`RequestReader` is fed bytes and hands each request read, or the
refusal of one it cannot read, to the consumer it was made with; these
tests are that consumer, with no socket and no server.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterator

import pytest

from mockskill.transport import Limits, Refusal, Request
from mockskill.transport.reading import RequestReader


class Events:
    """A consumer that keeps what the reader hands it."""

    def __init__(self, may_continue: bool = True) -> None:
        self.events: list[tuple[Request | Refusal, bool]] = []
        self.continues = 0
        self.may_continue = may_continue

    def request(self, request: Request, last: bool) -> None:
        self.events.append((request, last))

    def refused(self, refusal: Refusal) -> None:
        self.events.append((refusal, True))

    def continue_now(self) -> bool:
        self.continues += 1
        return self.may_continue


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()  # its clock only: the reader's deadlines
    yield loop
    loop.close()


def test_pipelined_requests_become_request_events_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    events = Events()
    reader = RequestReader(Limits(), loop, events)
    reader.feed(
        b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        b"GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    read = [(r.method, r.target, r.body, r.index, last) for r, last in events.events]
    assert read == [
        ("GET", "/one", b"", 1, False),
        ("POST", "/two", b"abc", 2, False),
        ("GET", "/three", b"", 3, True),  # Connection: close: the last
    ]
    assert reader.stopped  # nothing is read after the last
    reader.feed(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
    assert len(events.events) == 3


def test_a_request_split_across_packets_is_one_event_once_whole(
    loop: asyncio.AbstractEventLoop,
) -> None:
    events = Events()
    reader = RequestReader(Limits(), loop, events)
    reader.feed(b"GET /split HTTP/1.1\r\nHo")
    assert reader.in_message
    assert not events.events
    assert reader.deadline > 0  # the head's deadline runs while it is incomplete
    reader.feed(b"st: x\r\n\r\n")
    assert [r.target for r, _ in events.events] == ["/split"]
    assert not reader.in_message
    assert reader.deadline == 0.0


def test_a_request_that_breaks_a_limit_becomes_one_refusal_and_reading_stops(
    loop: asyncio.AbstractEventLoop,
) -> None:
    events = Events()
    reader = RequestReader(Limits(max_body=4), loop, events)
    reader.feed(b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde")
    ((refusal, last),) = events.events
    assert isinstance(refusal, Refusal)
    assert last
    assert (refusal.status, refusal.method, refusal.target) == (413, "POST", "/big")
    assert reader.stopped
    assert not reader.in_message


def test_expect_100_continue_asks_the_consumer_and_waits_its_turn_if_told(
    loop: asyncio.AbstractEventLoop,
) -> None:
    head = b"POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    now = Events(may_continue=True)
    reader = RequestReader(Limits(), loop, now)
    reader.feed(head)
    assert now.continues == 1
    assert not reader.continue_pending

    later = Events(may_continue=False)
    reader = RequestReader(Limits(), loop, later)
    reader.feed(head)
    assert later.continues == 1
    assert reader.continue_pending
    assert reader.deadline == 0.0  # no deadline while it waits its turn
    reader.body_begins()  # the consumer sent it, its turn come
    assert not reader.continue_pending
    assert reader.deadline > 0
    reader.feed(b"ok")
    assert [r.body for r, _ in later.events] == [b"ok"]


def test_a_released_reader_lets_go_of_its_consumer(loop: asyncio.AbstractEventLoop) -> None:
    # The consumer (the connection) owns the reader: no cycle is left for the cyclic GC.
    events = Events()
    reader = RequestReader(Limits(), loop, events)
    consumer = weakref.ref(events)
    reader.release()
    del events
    assert consumer() is None
    assert reader.stopped
