"""One JSON style for every answer mockskill writes itself (mockskill/protocol/jsonstyle.py).

Each answer is fetched with a real client from a real server; its body must
be exactly what ``jsonstyle.dumps`` makes of the document it holds: one
line, ``", "`` and ``": "`` between items, keys in mockskill's order, no
newline at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from click.testing import CliRunner

from mockskill import Server
from mockskill.cli import cli
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
