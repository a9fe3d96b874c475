"""The recording while it runs: exchanges kept in order, bounded, what is past the bound counted."""

from __future__ import annotations

import threading

import pytest
from recording_helpers import exchange

from mockskill.recording import Recording


def test_exchanges_are_kept_in_the_order_they_were_handed_over() -> None:
    recording = Recording("http://up.test")
    handed = [exchange("GET", f"/n/{i}", {"n": i}) for i in range(5)]
    for item in handed:
        recording.add(item)
    assert recording.exchanges() == tuple(handed)
    status = recording.status()
    assert (status.recording, status.target, status.count, status.dropped) == (
        True,
        "http://up.test",
        5,
        0,
    )
    assert status.bytes == sum(len(e.body) + len(e.response_body) for e in handed)


def test_past_the_count_bound_the_first_are_kept_and_the_rest_counted() -> None:
    recording = Recording(max_exchanges=3)
    for i in range(7):
        recording.add(exchange("GET", f"/n/{i}", {"n": i}))
    assert [e.target for e in recording.exchanges()] == ["/n/0", "/n/1", "/n/2"]
    assert recording.status().dropped == 4


def test_past_the_byte_bound_an_exchange_is_dropped_whole() -> None:
    recording = Recording(max_bytes=100)
    recording.add(exchange("POST", "/a", text=b"x" * 60))
    recording.add(exchange("POST", "/b", text=b"y" * 60))  # would make 120
    recording.add(exchange("POST", "/c", text=b"z" * 30))  # still fits
    assert [e.target for e in recording.exchanges()] == ["/a", "/c"]
    assert recording.status().dropped == 1
    assert recording.status().bytes == 90


def test_a_closed_recording_keeps_and_counts_nothing_more() -> None:
    recording = Recording()
    recording.add(exchange("GET", "/a", {}))
    recording.close()
    recording.add(exchange("GET", "/b", {}))
    status = recording.status()
    assert (status.recording, status.count, status.dropped) == (False, 1, 0)


def test_adds_from_many_threads_lose_none() -> None:
    recording = Recording(max_exchanges=10_000)
    item = exchange("GET", "/a", {})

    def add() -> None:
        for _ in range(500):
            recording.add(item)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert recording.status().count == 2000


def test_bounds_must_keep_something() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Recording(max_exchanges=0)
