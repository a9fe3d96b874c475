"""``POST /__admin/verify`` over a full journal: how long one verification takes (issue 28).

One ``python -m mockskill serve`` process (the default ``--journal-size``,
10 000 entries, bodies kept). Its journal is filled with 10 000 keep-alive
POSTs of a 1 KiB JSON body with a consumer's headers (``Content-Type``,
``Idempotency-Key``, ``Mockskill-Session``), all of one session (the worst
case: every entry is read), twice: once with one body sent again and again
(``same``: what a load test sends), once with a body of its own per request
(``distinct``). Then each verification below is asked ``--rounds`` times
(after one warm-up, which also builds the admin app), timed from the first
byte sent to the last byte of the answer read; medians and p90 (target: the
issue's example shape <= 50 ms). The client shares the machine's cores with
the server. Run::

    python bench/verify.py [--rounds 20 --entries 10000]
"""

from __future__ import annotations

import argparse
import json
import socket
import time

import _common as c

SESSION = "bench-verify"
VERIFICATIONS: dict[str, dict[str, object]] = {
    "body equals, held (the issue's example)": {
        "when": {"body": {"/input/text": "hello 42"}},
        "count": {"equals": 1},
    },
    "body equals, not held (near misses)": {"when": {"body": {"/input/text": "bonjour"}}},
    "header equals": {"when": {"headers": {"idempotency-key": "key-42"}}},
    "skill, method and path only": {
        "skill": "translate",
        "method": "POST",
        "path": "/skills/translate/invoke",
    },
    "body matches (every body parsed)": {
        "when": {"body": {"/input/text": {"matches": "^hello 4[0-9]$"}}}
    },
}


def body(n: int, same: bool) -> bytes:
    """A 1 KiB JSON body; ``/input/text`` is ``hello N`` (``hello 42`` for all when *same*)."""
    text = f"hello {42 if same else n}"
    document = {"input": {"text": text, "context": ""}, "options": {"lang": "en"}}
    document["input"]["context"] = "x" * (1024 - len(json.dumps(document)))
    return json.dumps(document).encode()


def fill(port: int, entries: int, same: bool) -> None:
    """*entries* keep-alive POSTs on one connection, each answer read whole."""
    with socket.create_connection((c.HOST, port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = s.makefile("rb")
        for n in range(entries):
            sent = body(n, same)
            s.sendall(
                b"POST /skills/translate/invoke?lang=en HTTP/1.1\r\n"
                + f"Host: {c.HOST}:{port}\r\nContent-Type: application/json\r\n".encode()
                + f"Idempotency-Key: key-{n}\r\nMockskill-Session: {SESSION}\r\n".encode()
                + f"Content-Length: {len(sent)}\r\n\r\n".encode()
                + sent
            )
            status = int(reader.readline().split()[1])
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            if status != 200:
                raise RuntimeError(f"POST /skills/translate/invoke answered {status}")


def admin(port: int, method: str, path: str, document: object = None) -> tuple[int, bytes, float]:
    """One admin request on a new connection: status, body and milliseconds taken."""
    data = b"" if document is None else json.dumps(document).encode()
    request = (
        f"{method} {path} HTTP/1.1\r\nHost: {c.HOST}:{port}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode() + data
    started = time.perf_counter()
    with socket.create_connection((c.HOST, port), timeout=60) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    took = (time.perf_counter() - started) * 1000
    status, answer = c.parse_response(b"".join(chunks))
    return status, answer, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--entries", type=int, default=10_000)
    args = parser.parse_args()
    rows = []
    with c.serving(lambda port: c.mockskill_cmd(port)) as server:
        for same in (True, False):
            status, _, _ = admin(server.port, "POST", "/__admin/reset?all=true")
            assert status == 200, status
            fill(server.port, args.entries, same)
            status, answer, _ = admin(server.port, "GET", "/__admin/journal?limit=1")
            size = json.loads(answer)["size"]
            for name, asked in VERIFICATIONS.items():
                document = {"session": SESSION, **asked}
                status, answer, _ = admin(server.port, "POST", "/__admin/verify", document)
                got = json.loads(answer)
                held = got if status == 200 else got["error"]["details"]
                times = []
                for _ in range(args.rounds):
                    status_again, _, took = admin(server.port, "POST", "/__admin/verify", document)
                    assert status_again == status
                    times.append(took)
                rows.append(
                    [
                        "same" if same else "distinct",
                        name,
                        f"{size}",
                        f"{status} ({held['count']} matched, {len(held['near_misses'])} near)",
                        f"{c.median(times):.1f}",
                        f"{c.percentile(times, 90):.1f}",
                    ]
                )
    c.print_table(["bodies", "verification", "entries", "answer", "median ms", "p90 ms"], rows)
    print()
    print(c.machine())


if __name__ == "__main__":
    main()
