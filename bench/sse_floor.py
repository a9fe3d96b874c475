"""The floor of issue 31's stream benchmarks: a bare asyncio SSE server (no parsing to
speak of, no journal, no scenario) streaming the bytes mockskill streams for the step
``{repeat: N, event: token, data: {text: tok}, id_from: 1}`` then ``end: {event: result,
data: {done: true}}``, to any request, on keep-alive connections.

``--every-ms 0``: as fast as the client reads (64 KiB chunks, ``drain()`` between them);
else event *i* is due ``i * every`` ms after the head (as mockskill's ``rate:``), each
on a sleep of its own. On uvloop when it is installed, as mockskill (``--loop asyncio``:
the stdlib's). Run::

    python bench/sse_floor.py --port 8080 --events 100000 --every-ms 0
"""

import argparse
import asyncio

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")  # fmt: skip
END = b'event: result\ndata: {"done":true}\n\n'


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def stream(writer: asyncio.StreamWriter, events: list[bytes], every: float) -> None:
    loop = asyncio.get_running_loop()
    writer.write(HEAD)
    start, i = loop.time(), 0
    while i < len(events):
        if every:
            await asyncio.sleep(start + (i + 1) * every - loop.time())
            batch, i = events[i], i + 1
        else:
            batch, i = b"".join(events[i : i + 1500]), i + 1500  # ~64 KiB
        writer.write(chunk(batch))
        await writer.drain()
    writer.write(chunk(END) + b"0\r\n\r\n")


async def main(args: argparse.Namespace) -> None:
    events = [b'id: %d\nevent: token\ndata: {"text":"tok"}\n\n' % i
              for i in range(1, args.events + 1)]  # fmt: skip

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
                await reader.readexactly(length)
                await stream(writer, events, args.every_ms / 1000)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", args.port, backlog=16384)
    await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--every-ms", type=float, default=0.0)
    parser.add_argument("--loop", choices=["auto", "asyncio"], default="auto")
    args = parser.parse_args()
    try:
        import uvloop  # mockskill's loop when it is installed: the floor's too
    except ImportError:
        args.loop = "asyncio"
    (asyncio.run if args.loop == "asyncio" else uvloop.run)(main(args))
