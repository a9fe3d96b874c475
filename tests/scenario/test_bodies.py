"""Bytes bodies: ``body_base64`` and ``body_file`` load into the exact bytes a step sends,
and every way they can be wrong is a positioned problem."""

from __future__ import annotations

import base64
import gzip
import os
import socket
from pathlib import Path

import pytest
import requests
from conftest import assert_problem

from mockskill import ScenarioError, Server, load_paths, load_text
from mockskill.scenario.bodies import BYTES_TYPE, MAX_BODY_FILE_BYTES
from mockskill.scenario.problems import Problem

BINARY = bytes(range(256)) + b"{base_url}"


def route(step: str) -> str:
    """A route whose one step is *step* (a flow mapping); the step is on line 4."""
    return f"name: bytes\nroutes:\n  - path: /b\n    steps: [{step}]\n"


def problems(text: str, file: Path | None = None) -> list[Problem]:
    if file is not None:
        file.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "s.yaml") if file is None else load_paths([file])
    return list(caught.value.problems)


def served(text_or_file: str | Path) -> requests.Response:
    source = text_or_file if isinstance(text_or_file, str) else str(text_or_file)
    with Server(source) as server:
        return requests.get(f"{server.url}/b", timeout=10)


def test_body_base64_sends_its_bytes_exactly_with_the_steps_type_or_octet_stream() -> None:
    encoded = base64.b64encode(BINARY).decode()
    typed = served(route(f"{{body_base64: '{encoded}', headers: {{Content-Type: image/png}}}}"))
    assert (typed.content, typed.headers["Content-Type"]) == (BINARY, "image/png")
    plain = served(route(f"{{body_base64: '{encoded}'}}"))
    assert (plain.content, plain.headers["Content-Type"]) == (BINARY, BYTES_TYPE)


def test_body_base64_may_be_folded_over_lines() -> None:
    encoded = base64.encodebytes(BINARY * 4).decode()  # 76 characters a line
    text = "name: bytes\nroutes:\n  - path: /b\n    steps:\n      - body_base64: |\n"
    text += "".join(f"          {line}\n" for line in encoded.splitlines())
    assert served(text).content == BINARY * 4


def test_a_compressed_body_keeps_its_content_encoding_and_a_client_decodes_it() -> None:
    packed = base64.b64encode(gzip.compress(b'{"ok": true}', mtime=0)).decode()
    headers = "{Content-Encoding: gzip, Content-Type: application/json}"
    step = f"{{body_base64: '{packed}', headers: {headers}}}"
    with Server(route(step)) as server:
        assert requests.get(f"{server.url}/b", timeout=10).json() == {"ok": True}
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"\r\nContent-Encoding: gzip\r\n" in head
    assert body == base64.b64decode(packed)


def test_body_file_sends_the_bytes_of_a_file_beside_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "bodies").mkdir()
    (tmp_path / "bodies" / "logo.png").write_bytes(BINARY)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(route("{body_file: bodies/logo.png}"), encoding="utf-8")
    assert served(scenario).content == BINARY


BAD = [
    # (step, path, expected, found)
    pytest.param(
        "{body_base64: 'not base64!'}",
        "routes[0].steps[0].body_base64",
        "base64 (RFC 4648",
        "'notbase64!', which is not",
        id="bad-base64",
    ),
    pytest.param(
        "{body_base64: 'abc'}",
        "routes[0].steps[0].body_base64",
        "base64 (RFC 4648",
        "'abc', which is not",
        id="bad-padding",
    ),
    pytest.param(
        "{body_base64: 12}",
        "routes[0].steps[0].body_base64",
        "base64 (RFC 4648",
        "12",
        id="not-a-string",
    ),
    pytest.param(
        "{body_base64: 'AA==', text: hi}",
        "routes[0].steps[0].body_base64",
        "one of error, json, text, body_base64, body_file, descriptor, rate_limited, task or"
        " stream",
        "text and body_base64 together",
        id="two-bodies",
    ),
    pytest.param(
        "{body_file: logo.png}",
        "routes[0].steps[0].body_file",
        "body_file in a scenario read from a file",
        "a scenario given as text (s.yaml)",
        id="file-in-text",
    ),
]


@pytest.mark.parametrize(("step", "path", "expected", "found"), BAD)
def test_a_bad_bytes_body_is_a_positioned_problem(
    step: str, path: str, expected: str, found: str
) -> None:
    [problem] = problems(route(step))
    assert problem.path == path
    assert problem.line == 4
    assert problem.expected.startswith(expected), problem
    assert problem.found.startswith(found), problem


def test_a_missing_body_file_is_a_positioned_problem(tmp_path: Path) -> None:
    [problem] = problems(route("{body_file: gone.bin}"), tmp_path / "s.yaml")
    assert_problem(
        problem,
        "routes[0].steps[0].body_file",
        4,
        25,
        "the path of a file beside the scenario",
        "'gone.bin', which cannot be read: No such file or directory",
        "",
    )


@pytest.mark.parametrize(
    "name", ["../secret.txt", "inner/../../secret.txt", "link/secret.txt", "/etc/hostname"]
)
def test_a_body_file_outside_the_scenarios_folder_is_refused(tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not to be served", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("not to be served", encoding="utf-8")
    folder = tmp_path / "scenarios"
    (folder / "inner").mkdir(parents=True)
    (folder / "link").symlink_to(outside, target_is_directory=True)
    [problem] = problems(route(f"{{body_file: '{name}'}}"), folder / "s.yaml")
    assert problem.path == "routes[0].steps[0].body_file"
    assert problem.found.startswith(f"{name!r}, "), problem
    assert "outside" in problem.found or "absolute" in problem.found, problem


def test_a_body_file_that_is_not_a_regular_file_or_too_big_is_refused(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    with (tmp_path / "big").open("wb") as big:
        big.truncate(MAX_BODY_FILE_BYTES + 1)
    scenario = tmp_path / "s.yaml"
    [problem] = problems(route("{body_file: folder}"), scenario)
    assert "Is a directory" in problem.found or "not a regular file" in problem.found, problem
    [problem] = problems(route("{body_file: pipe}"), scenario)  # read, it would hang the load
    assert "not a regular file" in problem.found, problem
    [problem] = problems(route("{body_file: big}"), scenario)
    assert problem.expected == f"a file of at most {MAX_BODY_FILE_BYTES} bytes"
