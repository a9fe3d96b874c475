"""A Server's scenarios from Python: as data, add and remove, reset, the journal.

The methods are mockskill/server/server.py's, each handing the work to the scenario set's
owner (mockskill/control/registry.py) or the state store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from mockskill import ScenarioError, Server

Serve = Callable[..., Server]


def test_scenarios_may_be_a_dict_or_a_list_of_paths_and_yaml_text(tmp_path: Path) -> None:
    with Server({"name": "data", "skills": [{"id": "from-dict"}]}) as server:
        assert server.scenario_names == ["data"]
        assert requests.post(server.invoke_url("from-dict"), timeout=10).status_code == 200
    file = tmp_path / "file.yaml"
    file.write_text("skills: [{id: from-file}]\n")
    mixed: list[Path | str | dict[str, Any]] = [
        file,
        "name: text\nskills: [{id: from-text}]\n",
        {"skills": [{"id": "d"}]},
    ]
    with Server(mixed) as server:
        assert server.scenario_names == ["file", "text", "data-2"]
        for skill in ("from-file", "from-text", "d"):
            assert requests.post(server.invoke_url(skill), timeout=10).status_code == 200


def test_a_list_with_clashing_names_is_refused_whole() -> None:
    with pytest.raises(ScenarioError, match="'a' again"):
        Server(["name: a\nskills: [{id: x}]\n", "name: a\nskills: [{id: y}]\n"])


def test_add_serves_beside_and_remove_takes_away(serve: Serve) -> None:
    server = serve("skills: [{id: first}]")
    server.add("name: extra\nskills: [{id: second}]\n")
    server.add({"name": "more", "skills": [{"id": "third"}]})
    assert server.scenario_names == ["test", "extra", "more"]
    for skill in ("first", "second", "third"):
        assert requests.post(server.invoke_url(skill), timeout=10).status_code == 200
    server.remove("extra")
    assert server.scenario_names == ["test", "more"]
    assert requests.post(server.invoke_url("second"), timeout=10).status_code == 404
    assert requests.post(server.invoke_url("first"), timeout=10).status_code == 200


def test_added_text_without_a_name_gets_one_of_its_own(serve: Serve) -> None:
    server = serve("skills: [{id: first}]")
    server.add("skills: [{id: a}]\n")
    server.add("skills: [{id: b}]\n")
    assert len(set(server.scenario_names)) == 3


def test_add_with_a_clash_changes_nothing(serve: Serve) -> None:
    server = serve("skills: [{id: first}]")
    before = server.engine.scenarios
    with pytest.raises(ScenarioError, match="skill id"):
        server.add("name: other\nskills: [{id: first}]\n")
    with pytest.raises(ScenarioError, match="scenario name"):
        server.add("name: test\nskills: [{id: new}]\n")
    with pytest.raises(ScenarioError):
        server.add("name: broken\nskills: [{id: x, invoke: {error: NOPE}}]\n")
    assert server.engine.scenarios is before
    assert server.scenario_names == ["test"]
    assert requests.post(server.invoke_url("new"), timeout=10).status_code == 404


def test_remove_of_an_unknown_name_is_a_clear_key_error(serve: Serve) -> None:
    server = serve("name: payments\nskills: [{id: first}]")
    with pytest.raises(KeyError, match=r"no scenario named 'payment'.*did you mean 'payments'"):
        server.remove("payment")
    assert server.scenario_names == ["payments"]


def test_reset_of_one_session_and_journal_per_session(serve: Serve) -> None:
    server = serve(
        """
        skills:
          - id: seq
            invoke:
              - {json: {n: 1}}
              - {json: {n: 2}}
        """
    )

    def call(session: str) -> int:
        headers = {"Mockskill-Session": session}
        response = requests.post(server.invoke_url("seq"), headers=headers, timeout=10)
        return int(response.json()["n"])

    assert [call("a"), call("a"), call("b")] == [1, 2, 1]
    assert len(server.journal()) == 3
    assert [e.session for e in server.journal("a")] == ["a", "a"]
    assert len(server.journal("b")) == 1
    server.reset("a")
    assert server.journal("a") == []
    assert len(server.journal("b")) == 1
    assert [call("a"), call("b")] == [1, 2]
    server.reset()
    assert server.journal() == []
    assert call("b") == 1
