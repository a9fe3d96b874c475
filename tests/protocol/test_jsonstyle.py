"""One JSON style for every answer mockskill writes itself (mockskill/protocol/jsonstyle.py).

Each answer is fetched with a real client from a real server; its body must
be exactly what ``jsonstyle.dumps`` makes of the document it holds: one
line, ``", "`` and ``": "`` between items, keys in mockskill's order, no
newline at the end.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from mockskill import Server
from mockskill.audit import report
from mockskill.cli import cli
from mockskill.engine.state import Entry
from mockskill.protocol import jsonstyle
from mockskill.protocol.catalog import Retry
from mockskill.protocol.jsonstyle import dumps

SESSION = {"Mockskill-Session": "jsonstyle"}

ANSWERS = [
    ("GET", "/skills", {}),
    ("GET", "/skills/translate", {}),
    ("POST", "/skills/translate/invoke", {}),
    ("POST", "/skills/endpoint-unreachable/invoke", {}),
    ("POST", "/skills/translate/invoke", {"Mockskill-Error": "AUTH_REQUIRED"}),
    ("GET", "/skills/transalte", {}),
    ("GET", "/nowhere", {}),
    ("POST", "/oauth/token", {}),
    ("GET", "/__admin/health", {}),
    ("GET", "/__admin/journal?session=jsonstyle", {}),
    ("GET", "/__admin/unmatched", {}),
    ("GET", "/__admin/report?session=jsonstyle", {}),
    ("GET", "/__admin/report?sesion=typo", {}),
    ("GET", "/__admin/scenarios", {}),
    ("GET", "/__admin/scenarios/healthy", {}),
    ("GET", "/__admin/corpus", {}),
    ("POST", "/__admin/validate", {}),
    ("POST", "/__admin/reset?session=nobody", {}),
]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server() as server:
        yield server


@pytest.mark.parametrize(("method", "path", "headers"), ANSWERS, ids=[a[1] for a in ANSWERS])
def test_every_answer_is_written_in_the_one_style(
    server: Server, method: str, path: str, headers: dict[str, str]
) -> None:
    response = requests.request(
        method, server.url + path, headers={**SESSION, **headers}, timeout=10
    )
    assert response.headers["Content-Type"].startswith("application/json"), path
    body = response.content.decode("ascii")  # non-ASCII is escaped
    assert body == dumps(json.loads(body)), path
    assert "\n" not in body


def test_the_command_lines_json_is_in_the_same_style(server: Server) -> None:
    requests.post(server.invoke_url("flaky"), headers=SESSION, timeout=10)
    printed = CliRunner().invoke(cli, ["report", server.url, "--session", "jsonstyle", "--json"])
    assert printed.exit_code == 0, printed.output
    assert printed.stdout == dumps(json.loads(printed.stdout)) + "\n"
    invalid = CliRunner().invoke(cli, ["check-descriptor", server.skill_url("invalid-descriptor")])
    assert invalid.exit_code == 1
    assert invalid.stdout == dumps(json.loads(invalid.stdout)) + "\n"


@dataclasses.dataclass
class Point:
    x: int


def _default(value: object) -> object:
    """Flask's way for what JSON has no word for: a dataclass as its dict."""
    if isinstance(value, Point):
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class _Sub(dict):  # type: ignore[type-arg]
    pass


BIG_LIST = [{"n": n, "name": f"élan {n}", "tags": ["a", "b"], "ratio": n / 7} for n in range(2000)]

DOCUMENTS = {
    "scalars": [None, True, False, 0, -1, 10**30, 1.5, -0.0, 1e300, "", "plain"],
    "non-finite floats": [math.nan, math.inf, -math.inf, {"x": math.nan}],
    "unicode": {"é": 'ü\u2028\n"quoted" \\ 🎉', "\x00": "\x1f"},
    "empty containers": {"d": {}, "l": [], "t": (), "nested": [[], [{}], {"e": []}]},
    "tuples": (1, (2, (3, [4, (5,)]))),
    "non-str keys": {1: "one", 2.5: "two and a half", None: "none", False: "false"},
    "big, non-str keys": {n: [n, str(n)] for n in range(1000)},
    "subclasses": {"sub": _Sub(a=1), "ordered": OrderedDict(b=2)},
    "deep": {"a": [{"b": [{"c": [{"d": [{"e": [{"f": [{"g": [{"h": [1, [2]]}]}]}]}]}]}]}]},
    "default": {"point": Point(1), "points": [Point(n) for n in range(600)]},
    "big list": BIG_LIST,
    "big dict": {f"key {n}": {"v": [n] * 3} for n in range(1000)},
    "big, nested": {"outer": [{"inner": BIG_LIST[:700]}, BIG_LIST[700:]]},
}


@pytest.mark.parametrize("document", DOCUMENTS.values(), ids=list(DOCUMENTS))
def test_encoding_in_pieces_writes_exactly_what_dumps_writes(document: Any) -> None:
    assert jsonstyle.encode(document, default=_default) == json.dumps(document, default=_default)


def test_encoding_in_pieces_refuses_what_dumps_refuses() -> None:
    cyclic: list[Any] = []
    cyclic.append([cyclic] * 600)
    with pytest.raises(ValueError, match="Circular reference"):
        jsonstyle.encode(cyclic)
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonstyle.encode({"x": [object()] * 600})
    with pytest.raises(TypeError, match="keys must be"):
        jsonstyle.encode([{(1, 2): 0}] * 600)


class _Recording(json.JSONEncoder):
    """Keeps the length of each text one call of the C encoder writes."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces: list[int] = []

    def encode(self, o: Any) -> str:
        text = super().encode(o)
        self.pieces.append(len(text))
        return text


def _journal(sessions: int, count: int = 6000) -> list[Entry]:
    """A journal of *count* invokes over *sessions* sessions: 503s retried, then a 200."""
    entries = []
    for n in range(count):
        failed = n % 3 != 2
        entries.append(
            Entry(
                id=n,
                started=n * 0.01,
                finished=n * 0.01 + 0.001,
                session=f"session {n % sessions}",
                method="POST",
                path=f"/skills/skill-{n % 7}/invoke",
                status=503 if failed else 200,
                endpoint="invoke",
                skill=f"skill-{n % 7}",
                error_code="ENDPOINT_UNREACHABLE" if failed else None,
                retry=Retry(100, 3) if failed else None,
            )
        )
    return entries


@pytest.mark.parametrize("sessions", [1, 40], ids=["one session", "40 sessions"])
def test_no_piece_of_a_large_report_is_encoded_in_one_long_call(
    sessions: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report of megabytes is written by many calls of the C encoder, none of
    them more than ~15 KB (each holds the GIL, which the skill surface's loop needs)."""
    document = report(_journal(sessions))
    recording = _Recording()
    monkeypatch.setattr(jsonstyle, "_ENCODER", recording)
    text = jsonstyle.encode(document)
    assert text == json.dumps(document)
    assert len(text) > 2_000_000
    assert max(recording.pieces) <= 20_000
