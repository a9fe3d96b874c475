"""``--callback-allow HOST`` / ``MOCKSKILL_CALLBACK_ALLOW`` / ``Server(callback_allow=)``:
the hosts task callbacks may go to besides loopback, handed to the engine as one
immutable allow-list."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from mockskill import Server
from mockskill.cli import cli
from mockskill.cli import serve as serve_command
from mockskill.engine.callback_hosts import CallbackHosts, Receiver, Refused
from mockskill.server.listening import ServerError


class Stop(Exception):
    pass


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """What ``serve`` hands the Server as ``callback_allow``, one tuple per run."""
    given: list[tuple[str, ...]] = []

    def server(*args: Any, **options: Any) -> None:
        given.append(options["callback_allow"])
        raise Stop

    monkeypatch.setattr(serve_command, "Server", server)
    return given


def test_serve_hands_the_hosts_from_the_flags(handed: list[tuple[str, ...]]) -> None:
    run = CliRunner().invoke(
        cli, ["serve", "--callback-allow", "receiver.test", "--callback-allow", "10.0.0.7"]
    )
    assert isinstance(run.exception, Stop)
    assert handed == [("receiver.test", "10.0.0.7")]


def test_serve_reads_the_environment_comma_separated(handed: list[tuple[str, ...]]) -> None:
    env = {"MOCKSKILL_CALLBACK_ALLOW": "receiver.test, 10.0.0.7,::1"}
    assert isinstance(CliRunner().invoke(cli, ["serve"], env=env).exception, Stop)
    # --workers hands repeatable options to its workers spaced: those are read too
    env = {"MOCKSKILL_CALLBACK_ALLOW": "receiver.test 10.0.0.7"}
    assert isinstance(CliRunner().invoke(cli, ["serve"], env=env).exception, Stop)
    assert handed == [("receiver.test", "10.0.0.7", "::1"), ("receiver.test", "10.0.0.7")]


def test_serve_allows_no_host_but_loopback_by_default(handed: list[tuple[str, ...]]) -> None:
    assert isinstance(CliRunner().invoke(cli, ["serve"]).exception, Stop)
    assert handed == [()]


@pytest.mark.parametrize("host", ["*", "http://receiver.test", "receiver.test:8080"])
def test_serve_refuses_what_is_not_a_host_as_a_usage_error(
    handed: list[tuple[str, ...]], host: str
) -> None:
    refused = CliRunner().invoke(cli, ["serve", "--callback-allow", host])
    assert refused.exit_code == 2
    assert "--callback-allow" in refused.output
    assert "without scheme, port" in refused.output
    assert handed == []


def test_serve_help_lists_the_option_and_its_variable() -> None:
    shown = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200).output
    assert "--callback-allow HOST" in shown
    assert "MOCKSKILL_CALLBACK_ALLOW" in shown


def test_the_server_hands_its_allow_list_to_the_engine() -> None:
    with Server(callback_allow=["Receiver.Test", "10.0.0.7"]) as server:
        hosts = server.engine.callback_hosts
        assert hosts == server.callback_hosts == CallbackHosts.of(["receiver.test", "10.0.0.7"])
        assert isinstance(hosts.judge("http://receiver.test:9000/hook"), Receiver)
        assert isinstance(hosts.judge("http://other.test/hook"), Refused)


def test_a_server_without_an_allow_list_calls_back_loopback_only() -> None:
    with Server() as server:
        hosts = server.engine.callback_hosts
        assert hosts.allowed == frozenset()
        assert isinstance(hosts.judge("http://127.0.0.1:9000/hook"), Receiver)
        assert isinstance(hosts.judge("http://receiver.test/hook"), Refused)


def test_one_host_may_be_given_as_a_string() -> None:
    server = Server(callback_allow="receiver.test")
    assert server.callback_hosts.allowed == frozenset({"receiver.test"})


def test_the_server_refuses_what_is_not_a_host() -> None:
    with pytest.raises(ServerError, match=r"callback_allow: '\*\.test' is not a host name"):
        Server(callback_allow=["receiver.test", "*.test"])
