"""How the engine's requests read in the journal: one Entry type, whoever recorded it."""

from __future__ import annotations

import textwrap
import time

from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from mockskill import load_text
from mockskill.engine.engine import Engine
from mockskill.engine.entries import Entry, kept
from mockskill.engine.plan import Outcome
from mockskill.engine.state import State
from mockskill.wsgi.player import handle

SCENARIO = """
    name: kinds
    skills:
      - id: plain
        invoke:
          steps: [{json: 1}]
      - id: slow
        invoke:
          steps: [{delay: 5, json: 2}]
"""


class Keeping(State):
    """The in-memory store, keeping what each record() was handed, as it was handed."""

    def __init__(self) -> None:
        super().__init__(seed=1)
        self.handed: list[object] = []

    def record(self, entry: Entry) -> None:
        self.handed.append(entry)
        super().record(entry)


def request(method: str, path: str, headers: dict[str, str] | None = None) -> Request:
    return Request(EnvironBuilder(path=path, method=method, headers=headers).get_environ())


def test_every_request_is_recorded_as_the_entry_its_readers_see() -> None:
    """One journal entry type: a plain step journalled as planned, a step played and
    reported, a miss, a refusal and the WSGI path's request all hand the store the Entry
    that the journal's readers get, ``tls`` a field of its own (a request's None)."""
    store = Keeping()
    engine = Engine(load_text(textwrap.dedent(SCENARIO), "kinds.yaml"), store)
    engine.plan(request("POST", "/skills/plain/invoke"))  # journalled as planned
    plan, record = engine.plan(request("POST", "/skills/slow/invoke"))
    now = time.time()
    record(Outcome(plan.answer, now, now, now))
    miss, record_miss = engine.plan(request("GET", "/nothing"))
    record_miss(Outcome(miss.answer, now, now, now))
    engine.plan(request("GET", "/skills", {"Mockskill-Session": "s" * 300}))  # refused
    handle(engine, request("POST", "/skills/plain/invoke"))
    assert len(store.handed) == 5
    assert {type(entry) for entry in store.handed} == {Entry}
    assert [entry.tls for entry in store.handed] == [None] * 5
    assert store.journal() == [kept(entry, ()) for entry in store.handed]  # shown as read
