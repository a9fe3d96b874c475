"""Where a task's callbacks may go (engine/callback_hosts.py): loopback, and the hosts the
server was started with (``--callback-allow``), judged on the URL as written."""

from __future__ import annotations

import pytest

from mockskill.engine.callback_hosts import (
    MAX_URL_BYTES,
    CallbackHosts,
    Receiver,
    Refused,
    host_problem,
)

NONE_ALLOWED = CallbackHosts()


def receiver(url: str, hosts: CallbackHosts = NONE_ALLOWED) -> Receiver:
    judged = hosts.judge(url)
    assert isinstance(judged, Receiver), judged
    return judged


def reason(url: object, hosts: CallbackHosts = NONE_ALLOWED) -> str:
    judged = hosts.judge(url)
    assert isinstance(judged, Refused), judged
    return judged.reason


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://127.8.9.10/hook",
        "https://127.255.255.254:9443/hook",
        "http://localhost:3000/hook",
        "http://LOCALHOST:3000/hook",
        "http://[::1]:3000/hook",
        "http://[0:0:0:0:0:0:0:1]/hook",
    ],
)
def test_loopback_is_called_without_being_allowed(url: str) -> None:
    assert receiver(url).url == url


def test_a_receiver_says_where_to_connect_and_what_to_ask() -> None:
    hook = receiver("http://localhost:3000/hooks/task?source=mockskill#ignored")
    assert (hook.scheme, hook.host, hook.port) == ("http", "localhost", 3000)
    assert hook.target == "/hooks/task?source=mockskill"
    assert hook.address == "localhost:3000"


def test_the_port_defaults_to_the_schemes_and_the_path_to_the_root() -> None:
    assert (receiver("http://127.0.0.1").port, receiver("http://127.0.0.1").target) == (80, "/")
    assert receiver("https://localhost").port == 443


def test_an_ipv6_receiver_is_named_in_brackets() -> None:
    hook = receiver("http://[::1]:3000/")
    assert (hook.host, hook.address) == ("::1", "[::1]:3000")


@pytest.mark.parametrize(
    "url",
    [
        "http://example.test/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://0.0.0.0:8080/hook",
        "http://[::ffff:a00:7]/hook",
        "http://localhost.example.test/hook",
        "http://127.0.0.1.example.test/hook",
        "http://localhost./hook",  # as written: not the name localhost
        "http://2130706433/hook",  # 127.0.0.1 as a number: some clients read it so
        "http://127.1/hook",
        "http://0177.0.0.1/hook",
    ],
)
def test_any_other_host_is_refused_unless_allowed(url: str) -> None:
    assert "neither loopback nor an allowed host" in reason(url) or "not a host" in reason(url)


def test_an_allowed_host_is_called_as_written_without_a_lookup() -> None:
    hosts = CallbackHosts.of(["Receiver.Example.Test", "10.0.0.7", "[fd00::7]"])
    assert receiver("https://receiver.example.test/hook", hosts).host == "receiver.example.test"
    assert receiver("http://10.0.0.7:9000/", hosts).port == 9000
    assert receiver("http://[FD00::7]/", hosts).host == "fd00::7"
    # a name is not its address, nor a sub-domain its parent
    assert "neither loopback" in reason("http://10.0.0.8/", hosts)
    assert "neither loopback" in reason("http://a.receiver.example.test/", hosts)
    assert "neither loopback" in reason("http://receiver.example.test.evil.test/", hosts)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://127.0.0.1/hook", "not ftp:"),
        ("file:///etc/passwd", "not file:"),
        ("127.0.0.1:8080/hook", "no scheme"),
        ("//127.0.0.1/hook", "no scheme"),
        ("/hook", "no scheme"),
        ("http:///hook", "without a host"),
        ("http://:8080/hook", "without a host"),
        ("", "an empty URL"),
        ("http://127.0.0.1:99999/", "not a URL"),
        ("http://127.0.0.1:http/", "not a URL"),
        ("http://127.0.0.1:0/", "port 0"),
        ("http://[::1/", "not a URL"),
        ("http://127.0.0.1/a b", "characters a URL does not have"),
        ("http://127.0.0.1/\r\nX-Injected: 1", "characters a URL does not have"),
        ("http://evil.test\\@127.0.0.1/", "characters a URL does not have"),
        ("http://localhöst/", "characters a URL does not have"),
        ("http://user:pw@127.0.0.1/", "credentials"),
        ("http://127.0.0.1@evil.test/", "credentials"),
        ("http://[::1%25lo]/", "not a host name or an address"),
        ("http://ex*mple.test/", "not a host name or an address"),
    ],
)
def test_a_bad_url_is_refused_with_its_reason(url: str, why: str) -> None:
    assert why in reason(url)


def test_a_url_over_2_kib_is_refused_and_not_repeated_whole() -> None:
    base = "http://127.0.0.1/"
    assert receiver(base + "a" * (MAX_URL_BYTES - len(base)))
    judged = NONE_ALLOWED.judge(base + "a" * (MAX_URL_BYTES - len(base) + 1))
    assert isinstance(judged, Refused)
    assert f"over {MAX_URL_BYTES} bytes" in judged.reason
    assert len(judged.url) < 100


@pytest.mark.parametrize("url", [None, 42, ["http://127.0.0.1/"], {"url": "x"}])
def test_a_url_that_is_not_a_string_is_refused(url: object) -> None:
    assert "is a string" in reason(url)


@pytest.mark.parametrize(
    "host", ["example.test", "EXAMPLE.test", "10.0.0.7", "::1", "[::1]", "mock_receiver", "a"]
)
def test_an_allow_list_takes_names_and_addresses(host: str) -> None:
    assert host_problem(host) is None


@pytest.mark.parametrize(
    "host",
    [
        "",
        "  ",
        "*",
        "*.example.test",
        "http://example.test",
        "example.test:8080",
        "example.test/hook",
        "-example.test",
        "exa mple.test",
        "example..test",
    ],
)
def test_an_allow_list_refuses_what_is_not_a_host(host: str) -> None:
    assert host_problem(host) is not None
    with pytest.raises(ValueError, match="host"):
        CallbackHosts.of(["example.test", host])


def test_an_allow_list_is_immutable_and_compares_by_its_hosts() -> None:
    hosts = CallbackHosts.of(["b.test", "a.test", "A.test"])
    assert hosts == CallbackHosts(frozenset({"a.test", "b.test"}))
    assert hash(hosts) == hash(CallbackHosts.of(["a.test", "b.test"]))
    with pytest.raises(AttributeError):
        hosts.allowed = frozenset()  # type: ignore[misc]
