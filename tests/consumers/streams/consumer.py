"""A stream consumer as its user writes one, with httpx, requests or aiohttp, and one bug.

    python consumer.py CLIENT BUG SESSION BASE [BASE ...]

It invokes each skill of ``streams.yaml`` (beside it) once, as an operation: it reads the
Server-Sent Events, and when the stream breaks (a reset, its idle timeout on a stall, an
error event) it waits what the stream advised (its ``retry:`` field, the error's
``suggested_delay_ms``; else 1 s), doubled after each failure, and re-issues the request
with the operation's ``Idempotency-Key`` and, as ``Last-Event-ID``, the id of the last
event it got. It stops on a result, and on an error that is not retryable. Requests go
round the BASE URLs in turn (replicas of one store). ``BUG`` is ``none`` or the one
mistake it makes:

- ``no-idle-timeout``: no read timeout, so it holds a stalled stream;
- ``no-key``: no ``Idempotency-Key``;
- ``no-last-event-id``: re-issues without ``Last-Event-ID``;
- ``retry-nonretryable``: re-issues after ``PERMISSION_DENIED`` too;
- ``retry-too-soon``: re-issues at once, whatever the advice;
- ``gave-up``: a total timeout shorter than the slow stream (besides its idle one).

It prints one line per skill: how the operation ended.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

CLIENT, BUG, SESSION, *BASES = sys.argv[1:]
SKILLS = ("cut", "resumable", "stall", "overload", "denied", "slow")
IDLE = None if BUG == "no-idle-timeout" else 0.45  # streams.yaml's bound: 0.4
TOTAL = 0.25 if BUG == "gave-up" else None
RETRYABLE = {"ENDPOINT_UNREACHABLE", "EXECUTION_TIMEOUT"}
NEXT_BASE = itertools.cycle(BASES)

Event = dict[str, str]


class StreamBroke(Exception):
    """The connection failed mid-stream, or the idle timeout saw no byte for too long."""


class TookTooLong(Exception):
    """The total timeout ran out (the ``gave-up`` consumer's)."""


def sse_events(lines: Iterable[str]) -> Iterator[Event]:
    """The events of an SSE body's lines, as EventSource dispatches them (a ``retry:``
    field is yielded as an event of its own)."""
    event: Event = {}
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield {**event, "data": "\n".join(data)}
            event, data = {}, []
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "retry":
            yield {"retry": value}
        elif name in ("id", "event"):
            event[name] = value


def overdue(started: float) -> None:
    if TOTAL is not None and time.monotonic() - started > TOTAL:
        raise TookTooLong


def with_httpx() -> Callable[[str, dict[str, str], list[Event]], None]:
    import httpx

    client = httpx.Client(timeout=httpx.Timeout(5.0, read=IDLE))

    def attempt(url: str, headers: dict[str, str], events: list[Event]) -> None:
        try:
            with client.stream("POST", url, headers=headers, json={"q": "hi"}) as answer:
                started = time.monotonic()
                for event in sse_events(answer.iter_lines()):
                    events.append(event)
                    overdue(started)
        except (httpx.ReadTimeout, httpx.ReadError, httpx.RemoteProtocolError) as error:
            raise StreamBroke from error

    return attempt


def with_requests() -> Callable[[str, dict[str, str], list[Event]], None]:
    import requests

    session = requests.Session()

    def attempt(url: str, headers: dict[str, str], events: list[Event]) -> None:
        try:
            with session.post(
                url, headers=headers, json={"q": "hi"}, stream=True, timeout=(5.0, IDLE)
            ) as answer:
                started = time.monotonic()
                for event in sse_events(answer.iter_lines(decode_unicode=True)):
                    events.append(event)
                    overdue(started)
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as error:
            raise StreamBroke from error

    return attempt


def with_aiohttp() -> Callable[[str, dict[str, str], list[Event]], None]:
    import aiohttp

    async def read(url: str, headers: dict[str, str], events: list[Event]) -> None:
        timeout = aiohttp.ClientTimeout(total=TOTAL, sock_read=IDLE)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, headers=headers, json={"q": "hi"}) as answer,
        ):
            lines: list[str] = []
            async for raw in answer.content:
                lines.append(raw.decode().rstrip("\r\n"))
                if not lines[-1]:
                    events.extend(sse_events(lines))
                    lines.clear()

    def attempt(url: str, headers: dict[str, str], events: list[Event]) -> None:
        try:
            asyncio.run(read(url, headers, events))
        except aiohttp.SocketTimeoutError as error:  # sock_read: the idle timeout
            raise StreamBroke from error
        except TimeoutError as error:  # total
            raise TookTooLong from error
        except aiohttp.ClientError as error:
            raise StreamBroke from error

    return attempt


ATTEMPT = {"httpx": with_httpx, "requests": with_requests, "aiohttp": with_aiohttp}[CLIENT]()


def invoke(skill: str) -> str:
    """One operation on *skill*, its attempts and waits: how it ended."""
    key = str(uuid.uuid4())
    last_id: str | None = None
    retry_ms: int | None = None
    for attempt in range(1, 4):
        headers = {"Mockskill-Session": SESSION, "Accept": "text/event-stream"}
        if BUG != "no-key":
            headers["Idempotency-Key"] = key
        if last_id is not None and BUG != "no-last-event-id":
            headers["Last-Event-ID"] = last_id
        events: list[Event] = []
        try:
            ATTEMPT(f"{next(NEXT_BASE)}/skills/{skill}/invoke", headers, events)
        except TookTooLong:
            return f"{skill}: gave up (total timeout)"
        except StreamBroke:
            pass  # what came before the break is kept
        for event in events:
            retry_ms = int(event["retry"]) if "retry" in event else retry_ms
            last_id = event.get("id", last_id)
        last: dict[str, Any] = events[-1] if events else {}
        if last.get("event") == "result":
            return f"{skill}: result after {attempt} attempts"
        wait_ms = 1000 if retry_ms is None else retry_ms  # the chapter's first wait
        if last.get("event") == "error":
            error = json.loads(last["data"])["error"]
            if error["code"] not in RETRYABLE and BUG != "retry-nonretryable":
                return f"{skill}: {error['code']}, not retried"
            wait_ms = (error.get("retry") or {}).get("suggested_delay_ms", 200)
        backoff = 2 ** (attempt - 1)  # the advice is the first wait: double it after each
        time.sleep(0 if BUG == "retry-too-soon" else wait_ms * backoff * 1.25 / 1000)
    return f"{skill}: gave up after 3 attempts"


for name in SKILLS:
    print(invoke(name), flush=True)
