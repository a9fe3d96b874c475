"""The needs a request hands out, and the drivers that answer them (inline or awaited).

The engine asks the store nothing itself: each request says what it needs of
it (a Take per sequence step, a UseToken for an issued OAuth token, an
IssueToken at the token endpoint) and is resumed with the answer. A store that
writes down the needs it is asked shows which a request makes; one that
answers what the test says shows that the answer, not the engine, decides.
"""

from __future__ import annotations

import asyncio
import base64
import json
import textwrap
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from mockskill import load_text
from mockskill.engine import choosing
from mockskill.engine.choosing import Decided
from mockskill.engine.engine import STATE_UNAVAILABLE, Engine
from mockskill.engine.incoming import Incoming
from mockskill.engine.pending import Pending, answered, awaited
from mockskill.engine.state import State
from mockskill.engine.store import (
    IssueToken,
    Need,
    NeedAnswer,
    ReadState,
    SetState,
    StoreUnavailable,
    Take,
    Taken,
    UseToken,
)
from mockskill.wsgi.player import handle

SCENARIO = """
    name: shop
    auth:
      clients: [{client_id: app, client_secret: s3cret, scopes: [orders]}]
      tokens: [{token: static, scopes: [orders]}]
    skills:
      - id: plain
        invoke:
          steps: [{json: 1}, {json: 2}]
          end: fail
      - id: guarded
        requires: {scopes: [orders]}
        invoke:
          steps: [{json: ok}]
      - id: lucky
        invoke:
          steps:
            - one_of: [{weight: 1, json: heads}, {weight: 1, json: tails}]
    ---
    name: down
    outage: {duration: 60000, step: {error: ENDPOINT_UNREACHABLE}}
    skills:
      - id: dark
        invoke:
          steps: [{json: lit}]
"""


class Recording(State):
    """The in-memory store, writing down every need it is asked (in order)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.needs: list[Need] = []

    def answer(self, need: Need) -> NeedAnswer:
        self.needs.append(need)
        return super().answer(need)


class Told(Recording):
    """Answers each Take with what the test says (the store decides, not the engine)."""

    def __init__(self, taken: Taken) -> None:
        super().__init__(seed=7)
        self.taken = taken

    def answer(self, need: Need) -> NeedAnswer:
        if isinstance(need, Take):
            self.needs.append(need)
            return self.taken
        return super().answer(need)


class Unreachable(State):
    """A store that cannot answer any need."""

    def answer(self, need: Need) -> NeedAnswer:
        raise StoreUnavailable("connection refused (redis://store:6379/0)")


def request(
    method: str, path: str, headers: dict[str, str] | None = None, data: str | None = None
) -> Request:
    builder = EnvironBuilder(path=path, method=method, headers=headers, data=data)
    if data is not None:
        builder.content_type = "application/x-www-form-urlencoded"
    return Request(builder.get_environ())


def engine(store: State) -> Engine:
    return Engine(load_text(textwrap.dedent(SCENARIO), "needs.yaml"), store)


def body(engine: Engine, req: Request) -> tuple[int, Any]:
    plan, _ = engine.plan(req)
    return plan.answer.status, json.loads(plan.answer.body or b"null")


def token(engine: Engine) -> str:
    basic = base64.b64encode(b"app:s3cret").decode()
    form = request(
        "POST",
        "/oauth/token",
        {"Authorization": f"Basic {basic}"},
        "grant_type=client_credentials",
    )
    status, issued = body(engine, form)
    assert status == 200
    return str(issued["access_token"])


# -- the needs a request makes ------------------------------------------------------


def test_a_plain_step_makes_one_take() -> None:
    store = Recording(seed=1)
    served = engine(store)
    assert body(served, request("POST", "/skills/plain/invoke", {"Mockskill-Session": "a"})) == (
        200,
        1,
    )
    assert store.needs == [Take("a", "skill/plain/invoke", 0, "shop", None, False)]


def test_deciding_hands_out_the_take_and_journals_nothing_whoever_drives_it() -> None:
    """Engine.decide is one path with one kind of result for every driver (the loop's
    plan, the WSGI player): a sequence step's request comes to a Pending Take, on the
    in-memory store too, and only the driver that plays it journals it."""
    store = Recording(seed=1)
    served = engine(store)
    incoming = Incoming.of(request("POST", "/skills/plain/invoke", {"Mockskill-Session": "d"}))
    result = served.decide(incoming)
    assert isinstance(result, Pending)
    assert result.need == Take("d", "skill/plain/invoke", 0, "shop", None, False)
    assert store.needs == []  # asked by the driver, not while deciding
    decided = answered(result, store)
    assert isinstance(decided, Decided)
    assert decided.chosen is not None
    assert (decided.reply_to_send(), decided.chosen.position) == (None, 0)
    assert store.journal() == []


def test_each_session_takes_its_own_step_beyond_the_takes_a_table_keeps() -> None:
    # The routing table keeps each session's Take (choosing.MAX_KEPT_TAKES of them):
    # more sessions than that, twice over, each still takes its own positions.
    store = Recording(seed=1)
    served = engine(store)
    sessions = [f"s{i}" for i in range(choosing.MAX_KEPT_TAKES + 44)]
    for expected in (1, 2):
        for session in sessions:
            call = request("POST", "/skills/plain/invoke", {"Mockskill-Session": session})
            assert body(served, call) == (200, expected)
    assert [need.session for need in store.needs if isinstance(need, Take)] == sessions * 2


def test_a_miss_a_listing_and_a_forced_error_make_none() -> None:
    store = Recording(seed=1)
    served = engine(store)
    assert body(served, request("GET", "/nothing"))[0] == 404
    assert body(served, request("GET", "/skills"))[0] == 200
    forced = request("POST", "/skills/plain/invoke", {"Mockskill-Error": "ENDPOINT_UNREACHABLE"})
    assert body(served, forced)[0] == 503
    assert store.needs == []


def test_an_issued_token_is_used_before_the_step_is_taken() -> None:
    store = Recording(seed=1)
    served = engine(store)
    issued = token(served)
    assert len(store.needs) == 1
    need = store.needs[0]
    assert isinstance(need, IssueToken)
    assert need.token == issued
    assert need.scopes == frozenset({"orders"})
    store.needs.clear()
    call = request("POST", "/skills/guarded/invoke", {"Authorization": f"Bearer {issued}"})
    assert body(served, call) == (200, "ok")
    assert store.needs == [
        UseToken(issued),
        Take("default", "skill/guarded/invoke", 0, "shop", None, False),
    ]


def test_a_static_token_needs_no_store_and_a_refused_call_takes_no_position() -> None:
    store = Recording(seed=1)
    served = engine(store)
    refused = request("POST", "/skills/guarded/invoke", {"Authorization": "Bearer wrong"})
    status, error = body(served, refused)
    assert status == 401
    assert error["error"]["code"] == "AUTH_REQUIRED"
    assert store.needs == [UseToken("wrong")]  # asked, unknown: no Take
    store.needs.clear()
    static = request("POST", "/skills/guarded/invoke", {"Authorization": "Bearer static"})
    assert body(served, static) == (200, "ok")
    assert [type(need) for need in store.needs] == [Take]
    # Nothing refused moved the sequence: the accepted call took its first position.
    assert store.answer(Take("default", "skill/guarded/invoke", 0, "shop", None, False)) == (
        Taken(1, -1)
    )


def test_a_token_endpoint_refusal_issues_nothing() -> None:
    store = Recording(seed=1)
    served = engine(store)
    bad = request("POST", "/oauth/token", None, "grant_type=client_credentials")
    assert body(served, bad)[0] == 401
    assert store.needs == []


def test_a_take_asks_for_draws_and_names_the_outage_window() -> None:
    store = Recording(seed=1)
    served = engine(store)
    body(served, request("POST", "/skills/lucky/invoke"))
    body(served, request("POST", "/skills/dark/invoke"))
    assert store.needs == [
        Take("default", "skill/lucky/invoke", 0, "shop", None, True),
        Take("default", "skill/dark/invoke", 0, "down", (0.0, 60000.0), False),
    ]


# -- the answer decides the step ----------------------------------------------------


def test_the_position_taken_decides_the_step() -> None:
    assert body(engine(Told(Taken(1, -1))), request("POST", "/skills/plain/invoke")) == (200, 2)
    status, error = body(engine(Told(Taken(2, -1))), request("POST", "/skills/plain/invoke"))
    assert status == 500  # end: fail, past the last step
    assert error["error"]["code"] == "MOCKSKILL_SEQUENCE_EXHAUSTED"


def test_no_position_taken_is_the_outage_step() -> None:
    # The store's answer alone says it is in the outage (the clock is the store's).
    status, error = body(engine(Told(Taken(None, -1))), request("POST", "/skills/dark/invoke"))
    assert status == 503
    assert error["error"]["code"] == "ENDPOINT_UNREACHABLE"


def test_the_draw_number_taken_decides_the_drawn_values() -> None:
    results = {
        draw: body(engine(Told(Taken(0, draw))), request("POST", "/skills/lucky/invoke"))[1]
        for draw in range(40)
    }
    assert set(results.values()) == {"heads", "tails"}  # the number, not a stream, decides
    again = {
        draw: body(engine(Told(Taken(0, draw))), request("POST", "/skills/lucky/invoke"))[1]
        for draw in range(40)
    }
    assert again == results  # the same number draws the same, on any engine


# -- the drivers ---------------------------------------------------------------------


def test_a_pending_chain_is_answered_in_order_inline_and_awaited() -> None:
    def chain() -> Pending[tuple[NeedAnswer, NeedAnswer]]:
        first = Take("s", "k", 0, "", None, False)
        return Pending(
            first,
            lambda one: Pending(UseToken("none"), lambda two: (one, two)),
        ).then(lambda pair: pair)

    assert answered(chain(), State()) == (Taken(0, -1), None)
    store = State()
    assert asyncio.run(awaited(chain(), store)) == (Taken(0, -1), None)
    assert asyncio.run(awaited(chain(), store)) == (Taken(1, -1), None)


def test_store_unavailable_is_a_503_in_the_unified_body_journalled_as_refused() -> None:
    store = Unreachable(seed=1)
    served = engine(store)
    status, error = body(
        served, request("POST", "/skills/plain/invoke", {"Mockskill-Session": "u"})
    )
    assert status == 503
    assert error["error"]["code"] == STATE_UNAVAILABLE == "MOCKSKILL_STATE_UNAVAILABLE"
    assert "shared state store could not be reached" in error["error"]["message"]
    assert "not played" in error["error"]["message"]
    (entry,) = store.journal()
    assert (entry.endpoint, entry.status, entry.error_code) == ("refused", 503, STATE_UNAVAILABLE)
    assert entry.session == "u"
    assert entry.position is None


def test_store_unavailable_on_the_wsgi_path_too() -> None:
    store = Unreachable(seed=1)
    response = handle(engine(store), request("POST", "/skills/plain/invoke"))
    assert response.status_code == 503
    assert response.json is not None
    assert response.json["error"]["code"] == STATE_UNAVAILABLE


@pytest.mark.parametrize("path", ["/skills/plain/invoke", "/oauth/token"])
def test_store_unavailable_when_awaited(path: str) -> None:
    class Down(State):
        remote = True

        async def answer_async(self, need: Need) -> NeedAnswer:
            raise StoreUnavailable("timed out")

    store = Down(seed=1)
    served = engine(store)
    basic = base64.b64encode(b"app:s3cret").decode()
    req = request(
        "POST", path, {"Authorization": f"Basic {basic}"}, "grant_type=client_credentials"
    )
    plan, _ = asyncio.run(served.plan_async(req))
    assert plan.answer.status == 503
    assert json.loads(plan.answer.body)["error"]["code"] == STATE_UNAVAILABLE
    assert [e.endpoint for e in store.journal()] == ["refused"]  # the token was not granted


# -- scenario states: read where a case requires one, set where a step moves it ---------

STATES = """
    name: orders
    routes:
      - path: /orders
        method: POST
        steps: [{json: placed, set_state: placed}]
      - path: /orders/1
        cases:
          - state: placed
            json: found
        steps: [{status: 404, json: missing}]
      - path: /plain
        steps: [{json: plain}]
      - path: /coin
        steps:
          - one_of: [{json: heads, set_state: heads}, {json: tails}]
            set_state: tossed
"""


def stateful(store: State) -> Engine:
    return Engine(load_text(textwrap.dedent(STATES), "states.yaml"), store)


def test_a_case_requiring_a_state_reads_it_before_its_take() -> None:
    store = Recording(seed=1)
    served = stateful(store)
    assert body(served, request("GET", "/orders/1", {"Mockskill-Session": "s"})) == (404, "missing")
    assert store.needs == [
        ReadState("s", "orders"),
        Take("s", "route/orders/1", 0, "orders", None, False),
    ]


def test_a_step_that_moves_the_state_sets_it_after_its_take() -> None:
    store = Recording(seed=1)
    served = stateful(store)
    assert body(served, request("POST", "/orders", {"Mockskill-Session": "s"})) == (200, "placed")
    assert store.needs == [
        Take("s", "route/orders/0", 0, "orders", None, False),
        SetState("s", "orders", "placed"),
    ]
    store.needs.clear()
    assert body(served, request("GET", "/orders/1", {"Mockskill-Session": "s"})) == (200, "found")
    assert store.needs == [
        ReadState("s", "orders"),
        Take("s", "route/orders/1/case/0", 0, "orders", None, False),
    ]


def test_an_endpoint_without_states_asks_for_none_and_stays_plain() -> None:
    store = Recording(seed=1)
    served = stateful(store)
    plan, _ = served.plan(request("GET", "/plain", {"Mockskill-Session": "s"}))
    assert store.needs == [Take("s", "route/orders/2", 0, "orders", None, False)]
    assert plan.journalled  # the kept plain plan, journalled as it was planned


def test_the_outcome_drawn_moves_the_state_else_its_step() -> None:
    store = Recording(seed=3)
    served = stateful(store)
    moved = []
    for n in range(12):
        store.needs.clear()
        answer = body(served, request("GET", "/coin", {"Mockskill-Session": f"c{n}"}))[1]
        [set_state] = [need for need in store.needs if isinstance(need, SetState)]
        moved.append((answer, set_state.state))
    assert {("heads", "heads"), ("tails", "tossed")} == set(moved)


def test_the_store_not_the_engine_says_which_state_a_session_is_in() -> None:
    class InState(Recording):
        def answer(self, need: Need) -> NeedAnswer:
            if isinstance(need, ReadState):
                self.needs.append(need)
                return "placed"
            return super().answer(need)

    served = stateful(InState(seed=1))
    assert body(served, request("GET", "/orders/1")) == (200, "found")


def test_states_are_awaited_on_the_loop_as_answered_inline() -> None:
    store = Recording(seed=1)
    served = stateful(store)
    headers = {"Mockskill-Session": "loop"}
    asyncio.run(served.plan_async(Incoming.of(request("POST", "/orders", headers))))
    plan, _ = asyncio.run(served.plan_async(Incoming.of(request("GET", "/orders/1", headers))))
    assert plan.answer.body == b'"found"'
    assert [type(need).__name__ for need in store.needs] == [
        "Take",
        "SetState",
        "ReadState",
        "Take",
    ]
