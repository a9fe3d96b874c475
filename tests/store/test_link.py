"""The loop's Redis connection reads replies as hiredis does, however the bytes arrive."""

from __future__ import annotations

import hiredis
import pytest

from mockskill.store.commands import packed
from mockskill.store.link import Parser, ReplyError, reader

REPLIES = (
    b"*2\r\n:0\r\n:-1\r\n"  # a Take's {position, draw}
    b"$-1\r\n"  # nil: a token unknown
    b"$10\r\nread\x1fwrite\r\n"  # scopes
    b"$0\r\n\r\n"  # no scopes
    b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    b"+OK\r\n"
    b"*2\r\n*1\r\n$1\r\nk\r\n*0\r\n"  # nested, and empty
    b"*-1\r\n"
)


def replies(parser: Parser | object, pieces: list[bytes]) -> list[object]:
    got: list[object] = []
    for piece in pieces:
        parser.feed(piece)  # type: ignore[attr-defined]
        while (reply := parser.gets()) is not False:  # type: ignore[attr-defined]
            got.append(str(reply) if isinstance(reply, ReplyError) else reply)
    return got


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(REPLIES)])
def test_the_python_parser_reads_what_hiredis_reads_in_any_pieces(size: int) -> None:
    pieces = [REPLIES[i : i + size] for i in range(0, len(REPLIES), size)]
    expected = replies(hiredis.Reader(replyError=ReplyError), [REPLIES])
    assert len(expected) == 8
    assert replies(Parser(), pieces) == expected
    assert replies(reader(), pieces) == expected


def test_a_command_is_packed_as_an_array_of_bulk_strings() -> None:
    assert packed(("EVALSHA", "ab", 2, "sé")) == (
        b"*4\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n2\r\n$3\r\ns\xc3\xa9\r\n"
    )
