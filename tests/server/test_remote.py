"""RemoteServer: a running server's journal, reset and report through /__admin, as on Server."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import pytest
import requests

from mockskill import Server
from mockskill.audit import Policy
from mockskill.server.remote import RemoteError, RemoteServer


def free_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_journal_is_the_servers_own_entries(bundled: Server, session: dict[str, str]) -> None:
    remote = RemoteServer(bundled.url + "/")
    assert remote.url == bundled.url
    assert remote.invoke_url("flaky") == bundled.invoke_url("flaky")
    assert remote.skill_url("flaky") == bundled.skill_url("flaky")
    for _ in range(3):
        requests.post(remote.invoke_url("flaky"), headers=session)
    requests.get(remote.url + "/nowhere", headers=session)
    name = session["Mockskill-Session"]
    journal = remote.journal(name)
    assert [e.status for e in journal] == [503, 503, 200, 404]
    assert journal == bundled.journal(name)  # every field, retry and near misses included
    assert journal[0].retry is not None
    assert journal[3].near_misses
    assert len(remote.journal()) >= 4


def test_reset_forgets_one_session(bundled: Server, session: dict[str, str]) -> None:
    other = {"Mockskill-Session": session["Mockskill-Session"] + "-other"}
    for headers in (session, other):
        requests.post(bundled.invoke_url("flaky"), headers=headers)
    remote = RemoteServer(bundled.url)
    remote.reset(session["Mockskill-Session"])
    assert remote.journal(session["Mockskill-Session"]) == []
    assert len(remote.journal(other["Mockskill-Session"])) == 1
    assert requests.post(bundled.invoke_url("flaky"), headers=session).status_code == 503


def test_the_report_is_the_servers_with_the_policy_given(
    bundled: Server, session: dict[str, str]
) -> None:
    for _ in range(2):
        requests.post(bundled.invoke_url("auth-required"), headers=session)
    name = session["Mockskill-Session"]
    remote = RemoteServer(bundled.url)
    policy = Policy(initial_delay_ms=500.0, tolerance_ms=10.0, tolerance_ratio=0.25)
    got = remote.report(name, policy)
    expected = json.loads(json.dumps(bundled.report(name, policy)))
    assert abs(got.pop("generated") - expected.pop("generated")) < 60  # when each was made
    assert got == expected
    assert got["policy"] == policy.as_json()
    assert [s["session"] for s in got["sessions"]] == [name]


def test_the_verdict_is_the_servers_clean_or_not(bundled: Server, session: dict[str, str]) -> None:
    # auth-required retried unchanged: a non-retryable-retried finding, on both APIs.
    for _ in range(2):
        requests.post(bundled.invoke_url("auth-required"), headers=session)
    name = session["Mockskill-Session"]
    remote = RemoteServer(bundled.url)
    got = remote.verdict(name, "AUTH_REQUIRED,EMPTY_RESPONSE")
    assert got == bundled.verdict(name, ["AUTH_REQUIRED", "EMPTY_RESPONSE"])
    assert (got["clean"], got["uncovered"]) == (False, ["EMPTY_RESPONSE"])
    assert [f["rule"] for f in got["findings"]] == ["non-retryable-retried"]
    assert got["detail"].startswith(f"session {name!r} is not clean: 1 finding")
    assert bundled.verdict(name, policy=Policy(tolerance_ms=10.0))["requests"] == 2


def test_a_verdict_of_a_session_never_seen_is_a_lookup_error(
    bundled: Server, session: dict[str, str]
) -> None:
    requests.post(bundled.invoke_url("flaky"), headers=session)
    name = session["Mockskill-Session"]
    for server in (bundled, RemoteServer(bundled.url)):
        # (the server is shared: another test's session may be close too)
        with pytest.raises(LookupError, match=rf"did you mean {name!r}"):
            server.verdict(name + "x")
        with pytest.raises(ValueError, match="did you mean 'AUTH_REQUIRED'"):
            server.verdict(name + "x", require=["AUTH_REQIRED"])
    clean = bundled.verdict(name)
    assert clean["clean"] is True
    assert clean["detail"] == f"session {name!r} is clean: 1 request, no finding"


def test_the_admin_token_is_sent_and_its_absence_is_named(
    serve: Callable[..., Server],
) -> None:
    server = serve(None, admin_token="s3cret")
    assert RemoteServer(server.url, admin_token="s3cret").health()["status"] == "ok"
    with pytest.raises(RemoteError, match=r"answered 401: .*asks for its admin token") as caught:
        RemoteServer(server.url).journal()
    assert caught.value.status == 401
    assert not caught.value.token_refused
    assert "s3cret" not in str(caught.value)


def test_a_wrong_admin_token_is_said_refused_not_missing(serve: Callable[..., Server]) -> None:
    server = serve(None, admin_token="s3cret")
    with pytest.raises(RemoteError) as caught:
        RemoteServer(server.url, admin_token="wrong").journal()
    assert str(caught.value).endswith(
        "answered 401: the server refused the admin token given (not its token)"
    )
    assert caught.value.token_refused
    assert "wrong" not in str(caught.value)


def test_an_unreachable_server_is_named_with_the_reason() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RemoteError, match=rf"cannot reach {url}/__admin/health: .*refused"):
        RemoteServer(url, timeout=5).health()


def test_a_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(RemoteError, match=r"expected an http\(s\) URL .*, found 'ftp://h:21'"):
        RemoteServer("ftp://h:21")


def test_a_url_without_a_scheme_is_http_as_curl_takes_it(bundled: Server) -> None:
    remote = RemoteServer(f"localhost:{bundled.port}")
    assert remote.url == f"http://localhost:{bundled.port}"
    assert remote.health()["status"] == "ok"


def test_a_url_that_is_not_a_mockskill_server_is_named(bundled: Server) -> None:
    with pytest.raises(RemoteError, match=r"GET .*/skills/__admin/health answered 404: "):
        RemoteServer(bundled.url + "/skills").health()
