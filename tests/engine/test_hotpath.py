"""The engine's hot path: what it keeps between requests, and that keeping it changes nothing.

The journal records a tuple and builds the Entry when read; the Urls are
kept per Host header, plans per fixed step and address; the engine reads
requests through its own view. Each is held here to what it replaced.
"""

from __future__ import annotations

import hmac
import textwrap
import time
from collections.abc import Callable, Iterator

import pytest
import requests
from werkzeug.wrappers import Request

from mockskill import Server, load_text
from mockskill.engine import actions
from mockskill.engine.addresses import MAX_CACHED_BYTES
from mockskill.engine.digests import LATER_BYTES, KeyedDigest, LaterDigest
from mockskill.engine.engine import MAX_CACHED
from mockskill.engine.entries import Entry, escaped, oversized
from mockskill.engine.journalling import Journalling
from mockskill.engine.plan import Outcome, Plan
from mockskill.engine.state import MASK, State
from mockskill.protocol.catalog import Retry
from mockskill.server.dispatch import LoopDispatcher, _incoming
from mockskill.transport import Request as TransportRequest
from mockskill.transport.wsgi import environ as wsgi_environ
from mockskill.wsgi.player import handle

Serve = Callable[..., Server]

RANDOM_AND_FIXED = """
    name: mixed
    skills:
      - id: fixed
        invoke:
          json: {result: {url: "{base_url}/here"}}
      - id: drawn
        invoke:
          one_of:
            - {weight: 1, json: {result: a}}
            - {weight: 1, json: {result: b}}
      - id: jittered
        invoke: {delay: {uniform: [1, 500]}, json: {result: ok}}
"""


def transport_request(
    target: str,
    *,
    method: str = "POST",
    host: str = "127.0.0.1:8080",
    headers: tuple[tuple[str, str], ...] = (),
    body: bytes = b"",
) -> TransportRequest:
    return TransportRequest(
        method=method,
        target=target,
        version="1.1",
        headers=(("Host", host), *headers),
        body=body,
        peer=("127.0.0.1", 50000),
        local=("127.0.0.1", 8080),
        time=time.time(),
        connection=1,
        index=1,
    )


@pytest.fixture
def surface() -> Iterator[Callable[[str | None], tuple[Server, LoopDispatcher]]]:
    """A server's loop surface, planned in process (no socket): ``surface(yaml or None)``."""
    made: list[tuple[Server, LoopDispatcher]] = []

    def make(text: str | None) -> tuple[Server, LoopDispatcher]:
        scenarios = load_text(textwrap.dedent(text), "test.yaml") if text else None
        server = Server(scenarios, quiet=True, journal_size=50)
        server.engine.open()
        made.append((server, LoopDispatcher(server.engine, server._admin_wsgi)))
        return made[-1]

    yield make
    for server, loop in made:
        loop.close()
        server.engine.close()


def exchange(loop: LoopDispatcher, request: TransportRequest) -> Plan:
    plan = loop.plan(request)
    assert isinstance(plan, Plan)
    now = time.time()
    loop.played(request, Outcome(plan.answer, now, now, now))
    return plan


# -- the journal: an Entry per request, shown (bounded, masked) when read -------------


def test_the_journal_reads_back_what_was_recorded_after_twice_its_capacity() -> None:
    state = State(seed=1, journal_size=10)
    recorded = [
        Entry(state.next_id(), 1.0 + i, 2.0 + i, "s", "POST", f"/{i}", 200, "invoke", step=i)
        for i in range(20)
    ]
    for values in recorded:
        state.record(values)
    journal = state.journal()
    assert journal == recorded[10:]  # the oldest dropped
    assert [e.id for e in journal] == list(range(11, 21))
    assert state.journal() == journal  # built once, read again alike


def test_the_engine_s_journal_keeps_the_newest_requests_in_order_past_its_capacity(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    server, loop = surface(None)
    capacity = server.state.capacity
    for i in range(2 * capacity):
        exchange(loop, transport_request("/skills/translate/invoke", body=f"{i}".encode()))
    journal = server.state.journal()
    assert len(journal) == capacity
    ids = [e.id for e in journal]
    assert ids == sorted(ids)
    assert ids[-1] - ids[0] == capacity - 1
    assert len({e.body_digest for e in journal}) == capacity  # each request's own body
    assert {(e.path, e.status, e.endpoint, e.skill) for e in journal} == {
        ("/skills/translate/invoke", 200, "invoke", "translate")
    }


def test_a_secret_hidden_after_an_entry_was_recorded_masks_only_later_entries() -> None:
    state = State(seed=1)
    before = Entry(state.next_id(), 1.0, 2.0, "s", "GET", "/s3cret-token/x", 404, "unmatched")
    state.record(before)
    state.hide("s3cret-token")
    after = Entry(state.next_id(), 3.0, 4.0, "s3cret-token", "GET", "/s3cret-token", 404, "x")
    state.record(after)
    first, second = state.journal()
    # Masked as it was recorded: the secret was not hidden yet when the first one was.
    assert first.path == "/s3cret-token/x"
    assert (second.path, second.session) == (f"/{MASK}", MASK)


def test_a_hidden_admin_token_never_reaches_the_journal_of_a_planned_request(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    server, loop = surface(None)
    server.state.hide("adm1n-t0ken")
    exchange(loop, transport_request("/skills/adm1n-t0ken/invoke"))
    (entry,) = server.state.journal()
    assert "adm1n-t0ken" not in repr(entry)
    assert entry.path == f"/skills/{MASK}/invoke"


def test_a_client_text_over_its_bound_is_cut_when_recorded_not_kept_whole() -> None:
    state = State(seed=1)
    state.record(Entry(state.next_id(), 1.0, 2.0, "s", "GET", "/" + "x" * 60_000, 404, "x"))
    (slot,) = state._journal
    assert slot.recorded is None  # built at once: the 60 KB path is not held until read
    assert slot.built is not None
    assert len(slot.built.path) < 600


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("path", "/" + "p" * 600),
        ("session", "s" * 300),
        ("method", "M" * 200),
        ("skill", "k" * 200),
        ("credential", "bearer " + "c" * 200),
        ("protocol_version", "9" * 200),
        ("path", "/" + "p" * 511),  # at its bound, not over it
        ("protocol_version", "9" * 128),
    ],
)
def test_each_client_text_of_a_recorded_request_is_held_to_its_bound_when_recorded(
    field: str, value: str
) -> None:
    """State.record bounds each client text of a request's entry as entries.oversized
    says, each bound its own."""
    state = State(seed=1)
    recorded = Entry(state.next_id(), 1.0, 2.0, "s", "GET", "/p", 200, "invoke", "k")
    recorded = recorded._replace(**{field: value})
    state.record(recorded)
    (slot,) = state._journal
    assert (slot.built is not None) == oversized(recorded)
    assert oversized(recorded) == (len(value) > {"path": 512, "session": 256}.get(field, 128))
    assert state.journal()[0].id == recorded.id


# -- the request view ----------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/skills/translate/invoke",
        "/skills/a%20b/invoke?x=1",
        "//skills//x",
        "/caf%C3%A9",
        "/bad%FFbyte",
        "/%2F%2e%2E/x",
        "/raw\u00e9",
        "http://example.test/skills?x=1",
    ],
)
def test_the_engine_reads_path_and_headers_as_werkzeug_would(target: str) -> None:
    headers = (
        ("Mockskill-Session", "s1"),
        ("mockskill-session", "s2"),
        ("X-API-Key", "k"),
        ("Content-Type", "application/json"),
    )
    request = transport_request(target, headers=headers, body=b"{}")
    incoming = _incoming(request)
    werkzeug = Request(wsgi_environ(request))
    assert incoming.path == werkzeug.path
    assert incoming.method == werkzeug.method
    for name in ("Mockskill-Session", "x-api-key", "Content-Type", "Host", "Authorization"):
        assert incoming.header(name) == werkzeug.headers.get(name)
    assert incoming.body == werkzeug.get_data()
    assert incoming.server == werkzeug.server


# -- the Urls per Host, bounded ------------------------------------------------------


def test_a_client_varying_its_host_header_cannot_grow_the_engine_s_memory(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    server, loop = surface(None)
    for i in range(4 * MAX_CACHED):
        host = f"h{i}.test:8080"
        plan = exchange(loop, transport_request("/skills/translate", method="GET", host=host))
        assert f"http://{host}/skills/translate/invoke".encode() in plan.answer.body
    assert len(server.engine._urls_by_host) <= MAX_CACHED
    assert len(server.engine._plans) <= MAX_CACHED


def test_what_is_kept_per_host_is_bounded_in_bytes_not_only_in_entries(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    pad = "x" * 200_000  # a large reply with a placeholder: a copy of it per address
    server, loop = surface(
        f"""
        name: big
        skills:
          - id: big
            invoke:
              json: {{result: {{url: "{{base_url}}/here", pad: {pad}}}}}
        """
    )
    for i in range(MAX_CACHED - 1):  # fewer than the entries kept: bytes must bound them
        host = f"h{i}.test:8080"
        plan = exchange(loop, transport_request("/skills/big/invoke", host=host))
        assert f"http://{host}/here".encode() in plan.answer.body
    engine = server.engine
    kept_plans = sum(len(planned.reply.body) for _, _, planned in engine._plans.values())
    assert kept_plans <= MAX_CACHED_BYTES
    kept_filled = sum(len(reply.body) for reply in actions._kept.replies.values())
    assert kept_filled <= actions.MAX_FILLED_BYTES
    assert sum(map(len, (k[1] or "" for k in engine._urls_by_host))) <= MAX_CACHED_BYTES


# -- plans kept per step and address, and only those that are the same for all --------


def test_a_fixed_step_is_planned_once_per_address_and_never_shared_across_addresses(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    _, loop = surface(RANDOM_AND_FIXED)
    one = [exchange(loop, transport_request("/skills/fixed/invoke")) for _ in range(3)]
    other = exchange(loop, transport_request("/skills/fixed/invoke", host="other.test:8080"))
    assert one[0] is one[1] is one[2]  # the same plan and Answer: its head renders once
    assert b"http://127.0.0.1:8080/here" in one[0].answer.body
    assert b"http://other.test:8080/here" in other.answer.body


def test_a_random_step_is_planned_per_request(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    _, loop = surface(RANDOM_AND_FIXED)
    drawn = {exchange(loop, transport_request("/skills/drawn/invoke")).answer for _ in range(40)}
    assert {a.body for a in drawn} == {b'{"result": "a"}', b'{"result": "b"}'}  # none stuck
    waits = {exchange(loop, transport_request("/skills/jittered/invoke")).waits for _ in range(10)}
    assert len(waits) == 10


def test_two_hosts_get_two_descriptors_over_the_wire(serve: Serve) -> None:
    server = serve(RANDOM_AND_FIXED)
    for host in ("a.test", "b.test", "a.test"):
        response = requests.post(
            server.invoke_url("fixed"), headers={"Host": f"{host}:{server.port}"}, timeout=10
        )
        assert response.json() == {"result": {"url": f"http://{host}:{server.port}/here"}}


def test_escaping_leaves_printable_ascii_as_it_is_and_escapes_every_ascii_control() -> None:
    for code in range(128):
        char = chr(code)
        shown = escaped(f"a{char}b")
        if 0x20 <= code < 0x7F:
            assert shown == f"a{char}b"
        else:
            assert shown == f"a%{code:02X}b"


# -- the journal's keyed digests -----------------------------------------------------


@pytest.mark.parametrize("key_length", [1, 32, 64, 65, 200])
@pytest.mark.parametrize("body", [b"x", b'{"text": "Hello world"}', bytes(range(256)) * 300])
def test_a_keyed_digest_is_hmac_sha256_cut_to_sixteen_hex_digits(
    key_length: int, body: bytes
) -> None:
    key = bytes((7 * i + 3) % 256 for i in range(key_length))
    expected = "hmac-sha256:" + hmac.new(key, body, "sha256").hexdigest()[:16]
    assert KeyedDigest(key)(body) == expected
    digest = KeyedDigest(key)
    assert [digest(body), digest(body)] == [expected, expected]  # its prepared states unspent
    # The whole HMAC, as the journal's derived keys are made (no hmac module at start-up).
    assert digest.raw(body) == hmac.new(key, body, "sha256").digest()


@pytest.mark.parametrize("size", [1, 2, LATER_BYTES, LATER_BYTES + 1, 64 * 1024])
def test_a_short_body_is_digested_when_its_entry_is_shown_a_long_one_when_recorded(
    size: int,
) -> None:
    digest = KeyedDigest(b"k" * 32)
    body = (bytes(range(256)) * (size // 256 + 1))[:size]
    later = digest.later(body)
    if size <= LATER_BYTES:
        # The request path does not hash it; the entry holds the body until it is shown.
        assert isinstance(later, LaterDigest)
        assert later.text() == digest(body)
    else:
        # Not held that long: what a recorded entry holds stays within its bound.
        assert later == digest(body)


@pytest.mark.parametrize("packed", [False, True])
def test_a_bucket_s_journal_record_reads_as_a_dict_packed_or_not(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]], packed: bool
) -> None:
    # What a limit said of a request is made into its dict when the entry is first shown
    # (as a short body's digest is), or when the journal is packed before it was read.
    server, loop = surface(
        """
        name: limited
        skills:
          - id: by-session
            rate_limit: {capacity: 2, refill: 0.01}
            invoke: {json: {result: ok}}
          - id: by-tenant
            rate_limit: {capacity: 1, refill: 0.01, key: {header: x-tenant}, headers: none}
            invoke: {json: {result: ok}}
        """
    )
    session = (("Mockskill-Session", "s\n1"),)
    for path, headers in [
        *[("/skills/by-session/invoke", session)] * 3,
        ("/skills/by-tenant/invoke", (*session, ("X-Tenant", "acme"))),
        ("/skills/by-tenant/invoke", (*session, ("X-Tenant", "acme"))),
        ("/skills/by-tenant/invoke", session),
    ]:
        exchange(loop, transport_request(path, headers=headers))
    while packed and not server.state.compact(10_000):
        pass
    shown = [e.rate_limit for e in server.state.journal()]
    assert all(type(limit) is dict for limit in shown)
    assert [(s["refused"], s["remaining"], s["key"]) for s in shown] == [  # type: ignore[index]
        (False, 1, "session: s%0A1"),
        (False, 0, "session: s%0A1"),
        (True, 0, "session: s%0A1"),
        (False, 0, "header x-tenant: acme"),
        (True, 0, "header x-tenant: acme"),
        (False, 0, "header x-tenant"),
    ]
    refused = shown[2]
    assert refused is not None
    assert 99_000 < refused["next_ms"] <= 100_000
    assert refused["wait_ms"] == int(refused["retry_after_value"]) * 1000


def test_every_field_of_a_planned_request_s_entry_is_in_its_place(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    server, loop = surface(
        """
        name: placed
        skills:
          - id: slow
            invoke:
              - {delay: 5, execution: 7, error: ENDPOINT_UNREACHABLE}
              - {json: {result: ok}}
        """
    )
    headers = (
        ("Mockskill-Session", "s1"),
        ("Authorization", "Bearer t0k"),
        ("Skill-Protocol-Version", "1.0.0"),
    )
    request = transport_request("/skills/slow/invoke", headers=headers, body=b'{"a": 1}')
    plan = loop.plan(request)
    assert isinstance(plan, Plan)
    loop.played(request, Outcome(plan.answer, 10.0, 11.0, 12.0))
    (entry,) = server.state.journal()
    journalling = Journalling(server.state)  # the same keys, derived from the store's
    assert entry == Entry(
        id=entry.id,
        started=request.time,
        finished=12.0,
        session="s1",
        method="POST",
        path="/skills/slow/invoke",
        status=503,
        endpoint="invoke",
        skill="slow",
        scenario="placed",
        step=0,
        position=0,
        error_code="ENDPOINT_UNREACHABLE",
        retry=Retry(suggested_delay_ms=2000, max_attempts=5),
        forced=False,
        outage=False,
        choice=None,
        delay_ms=5,
        execution_ms=7,
        credential="bearer " + journalling.credential_digest(b"t0k"),
        protocol_version="1.0.0",
        body_digest=journalling.body_digest(b'{"a": 1}'),
        target="/skills/slow/invoke",
        headers=(
            ("Host", "127.0.0.1:8080"),
            ("Mockskill-Session", "s1"),
            ("Authorization", "Bearer ***"),
            ("Skill-Protocol-Version", "1.0.0"),
        ),
        body='{"a": 1}',
        body_encoding="text",
        body_size=8,
        connection="127.0.0.1:50000",  # the transport request's peer
    )


SEQUENCE = """
    name: counted
    skills:
      - id: counted
        invoke:
          - {json: {n: 0}}
          - {json: {n: 1}}
          - {delay: 3, error: ENDPOINT_UNREACHABLE}
          - {json: {n: 3}}
"""


def test_the_path_as_written_and_respelled_take_turns_in_one_sequence(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    # One is found by a lookup, the other by splitting: one sequence, one position.
    server, loop = surface(SEQUENCE)
    targets = ["/skills/counted/invoke", "/skills/counted/invoke/"] * 2
    statuses = [exchange(loop, transport_request(t)).answer.status for t in targets]
    assert statuses == [200, 200, 503, 200]
    journal = server.state.journal()
    assert [(e.position, e.step, e.delay_ms) for e in journal] == [
        (0, 0, None),
        (1, 1, None),
        (2, 2, 3),
        (3, 3, None),
    ]


CONSUMER_HEADERS = (
    ("Authorization", "Bearer t0k"),
    ("Skill-Protocol-Version", "1.0.0"),
    ("Content-Type", "application/json"),
)
"""What a consumer sends (a credential, a version, a JSON body): every field is journalled."""


def planned_alike_handled(server: Server) -> list[Entry]:
    """The journal's "planned" session's entries, checked equal field for field (but id,
    times and session) to the "handled" session's, which the WSGI path journalled."""
    journal = server.state.journal()
    planned = [e for e in journal if e.session == "planned"]
    handled = [e for e in journal if e.session == "handled"]

    assert [alike(e) for e in planned] == [alike(e) for e in handled]
    return planned


def alike(entry: Entry) -> Entry:
    """*entry* but its id, times and session, its headers by lower-case name in any order:
    WSGI keeps no header's name as written nor their order (and its environ has a
    ``Content-Length`` the test's requests do not send)."""
    headers = entry.headers
    if headers is not None:
        left_out = ("mockskill-session", "content-length")
        headers = tuple(sorted((k.lower(), v) for k, v in headers if k.lower() not in left_out))
    return entry._replace(id=0, started=0.0, finished=0.0, session="", headers=headers)


def test_a_planned_request_is_journalled_as_the_wsgi_path_journals_it(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    server, loop = surface(SEQUENCE)
    for session in ("planned", "handled"):
        for _ in range(3):
            request = transport_request(
                "/skills/counted/invoke",
                headers=(("Mockskill-Session", session), *CONSUMER_HEADERS),
                body=b'{"q": 1}',
            )
            if session == "planned":
                exchange(loop, request)
            else:
                handle(server.engine, Request(wsgi_environ(request)))
    planned = planned_alike_handled(server)
    assert [e.status for e in planned] == [200, 200, 503]
    assert all(e.credential and e.body_digest and e.protocol_version for e in planned)


PLAIN = """
    name: plain
    skills:
      - id: plain
        invoke:
          - {delay: 2, json: {result: late}}
          - {error: ENDPOINT_UNREACHABLE}
          - {json: {result: "{base_url}/done"}, keep_alive: {close_after: true}}
"""


def test_a_plain_step_is_journalled_when_planned_as_the_wsgi_path_journals_it(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    # Steps answered at once (an error with its retry advice, a reply filled with the
    # address, a keep-alive fault after it) are journalled as they are planned: the
    # entry is there before the transport reports the exchange, with every field the
    # WSGI path (which plays, then records) gives the same request.
    server, loop = surface(PLAIN)
    for session in ("planned", "handled"):
        for n in range(4):
            request = transport_request(
                "/skills/plain/invoke",
                headers=(("Mockskill-Session", session), *CONSUMER_HEADERS),
                body=b'{"q": 1}',
            )
            if session == "handled":
                handle(server.engine, Request(wsgi_environ(request)))
                continue
            before = len(server.state.journal())
            plan = loop.plan(request)
            assert isinstance(plan, Plan)
            in_journal = len(server.state.journal()) - before
            assert in_journal == (0 if n == 0 else 1)  # the delayed step: once played
            now = time.time()
            loop.played(request, Outcome(plan.answer, now, now, now))
            assert len(server.state.journal()) - before == 1  # and only once
    planned = planned_alike_handled(server)
    assert [(e.status, e.step, e.position, e.delay_ms) for e in planned] == [
        (200, 0, 0, 2),
        (503, 1, 1, None),
        (200, 2, 2, None),
        (200, 2, 3, None),  # the last step again (end: last)
    ]
    assert planned[1].retry == Retry(suggested_delay_ms=2000, max_attempts=5)
    assert all(e.started <= e.finished for e in planned)


ENDS = """
    name: ends
    skills:
      - id: cycled
        invoke:
          end: cycle
          steps:
            - {error: ENDPOINT_UNREACHABLE, times: 2}
            - {delay: 1, json: {result: slow}}
            - {json: {result: ok}, times: 3}
      - id: once
        invoke:
          end: fail
          steps:
            - {json: {result: ok}, times: 2}
"""


@pytest.mark.parametrize(
    ("skill", "steps"),
    [
        ("cycled", [0, 0, 1, 2, 2, 2, 0, 0, 1, 2, 2, 2, 0]),  # each step's times, then again
        ("once", [0, 0, None, None]),  # then the sequence is exhausted
    ],
)
def test_the_step_of_each_planned_request_is_the_one_its_position_and_end_rule_name(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
    skill: str,
    steps: list[int | None],
) -> None:
    """Steps that repeat (times), a step that is not plain among them, and the end rules
    past the last: planned, each request gets the step the WSGI path gives it."""
    server, loop = surface(ENDS)
    for session in ("planned", "handled"):
        for _ in steps:
            request = transport_request(
                f"/skills/{skill}/invoke", headers=(("Mockskill-Session", session),)
            )
            if session == "planned":
                exchange(loop, request)
            else:
                handle(server.engine, Request(wsgi_environ(request)))
    planned = planned_alike_handled(server)
    assert [e.step for e in planned] == steps
    assert [e.position for e in planned] == list(range(len(steps)))
    exhausted = [e.error_code for e in planned if e.step is None]
    assert exhausted == ["MOCKSKILL_SEQUENCE_EXHAUSTED"] * steps.count(None)


def test_a_plain_described_skill_is_journalled_when_planned_as_the_wsgi_path_does(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
) -> None:
    server, loop = surface(None)  # the bundled scenarios: their descriptors, valid or not

    pairs = []
    for skill in server.engine.scenarios.skills:
        target = f"/skills/{skill.id}"
        planned = (("Mockskill-Session", "planned"),)
        exchange(loop, transport_request(target, method="GET", headers=planned))
        handled = transport_request(target, method="GET", headers=(("Mockskill-Session", "h"),))
        handle(server.engine, Request(wsgi_environ(handled)))
        pairs.append(tuple(server.state.journal()[-2:]))
    assert [alike(p) for p, _ in pairs] == [alike(h) for _, h in pairs]
    assert any(p.invalid_descriptor for p, _ in pairs)
    assert any(not p.invalid_descriptor and p.status == 200 for p, _ in pairs)


def test_header_names_are_read_in_any_case_and_a_client_inventing_them_grows_nothing() -> None:
    from mockskill.engine import incoming

    for spelling in (b"Mockskill-Session", b"MOCKSKILL-SESSION", b"mockskill-session"):
        headers = incoming.headers_of_raw(((spelling, b"s1"), (b"Host", b"h")))
        assert headers == {"mockskill-session": "s1", "host": "h"}
    for n in range(3 * incoming.MAX_NAMES):
        headers = incoming.headers_of_raw(((f"X-Invented-{n}".encode(), b"v"),))
        assert headers == {f"x-invented-{n}": "v"}
        assert len(incoming._NAMES) <= incoming.MAX_NAMES


KEYED = """
    name: keyed
    skills:
      - id: plain
        invoke: {json: {result: ok}}
      - id: honours
        idempotency_key: true
        invoke: {json: {result: ok}}
"""


@pytest.mark.parametrize(
    ("skill", "key", "kept_plan"),
    [
        ("plain", "k-1", True),  # the key means nothing to it: today's path
        ("honours", None, True),  # no key: today's path
        ("honours", "k-1", False),  # the key is recalled first, then settled
    ],
)
def test_only_a_keyed_request_to_a_skill_that_honours_the_key_leaves_the_kept_plans(
    surface: Callable[[str | None], tuple[Server, LoopDispatcher]],
    skill: str,
    key: str | None,
    kept_plan: bool,
) -> None:
    server, loop = surface(KEYED)
    headers = (("Mockskill-Session", "s"), *((("Idempotency-Key", key),) if key else ()))
    for _ in range(2):
        request = transport_request(f"/skills/{skill}/invoke", headers=headers, body=b"{}")
        plan = loop.plan(request)
        assert isinstance(plan, Plan)
        assert plan.journalled is kept_plan  # a Plain's: journalled as it was planned
        if not kept_plan:
            now = time.time()
            loop.played(request, Outcome(plan.answer, now, now, now))
    entries = server.state.journal()
    assert [(e.executed, e.replayed) for e in entries] == (
        [(True, False)] * 2 if kept_plan else [(True, False), (False, True)]
    )
