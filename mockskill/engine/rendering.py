"""A templated step's reply made for one request: what its ``{{...}}`` placeholders read.

Only a step whose reply has a template (:attr:`~mockskill.scenario.reply.Reply.template`)
comes here; the engine never keeps its plan. :class:`RequestValues` is the
:class:`~mockskill.scenario.templates.Source` of one request: its body and headers as
the engine reads them, its query string and path variables parsed only when a
placeholder asks, its session, its position in its sequence, its time, and the
key of its draw (:func:`~.choosing.draw_key`, whose digests its ids and numbers
are: ``--seed`` replays them). A reply that cannot be rendered is answered with
:func:`not_rendered_reply`, a 400 in the unified body that says mockskill made it.
"""

from __future__ import annotations

from hashlib import blake2b

from ..protocol import catalog
from ..scenario.model import Reply, Route
from ..scenario.routes import values as route_values
from ..scenario.templates import NotRendered, Reading, uuid4_hex
from .incoming import Incoming
from .matching import Target

NOT_RENDERED = "MOCKSKILL_TEMPLATE_NOT_RENDERED"


class RequestValues:
    """What a template may read of one request (a :class:`~.templates.Source`)."""

    __slots__ = (
        "_query",
        "drawn",
        "key",
        "position",
        "request",
        "route",
        "scenario",
        "session_name",
        "skill",
        "started",
        "step",
    )

    def __init__(
        self,
        request: Incoming,
        target: Target,
        session: str,
        started: float,
        position: int | None,
        step: int | None,
        key: bytes | None,
    ) -> None:
        self.request = request
        self.session_name = session
        self.started = started
        self.position = position
        self.step = step
        self.key = key
        """Its draw's key (:func:`~.choosing.draw_key`): ids and numbers are its digests."""
        self.drawn = 0
        self.skill: str | None = target.skill_id
        self.scenario: str | None = target.scenario
        self.route: Route | None = target.route
        self._query: dict[str, str] | None = None

    def body(self) -> bytes:
        return self.request.body

    def header(self, name: str) -> str | None:
        return self.request.headers.get(name)

    def query(self, name: str) -> str | None:
        if self._query is None:  # parsed as a case's conditions parse it, on first use
            args = self.request.werkzeug().args
            self._query = {key: args.getlist(key)[0] for key in args}
        return self._query.get(name)

    def path_param(self, name: str) -> str | None:
        route = self.route
        return None if route is None else route_values(route.path, self.request.path).get(name)

    def skill_id(self) -> str | None:
        return self.skill

    def session(self) -> str:
        return self.session_name

    def attempt(self) -> int:
        return 1 if self.position is None else self.position + 1

    def fresh_id(self) -> str:
        return uuid4_hex(self._draw(b"id").hexdigest())

    def random_int(self, low: int, high: int) -> int:
        drawn = int.from_bytes(self._draw(b"int").digest())
        return low + drawn % (high - low + 1)  # (a 128-bit draw: no bias to see)

    def now_ms(self) -> int:
        return int(self.started * 1000)

    def _draw(self, what: bytes) -> blake2b:
        """128 bits drawn for *what*, as the hash whose digest they are: of the request's
        draw key and a count (each draw of the request a new one; the same seed, the same
        draws). An id takes its hex digest, a number its bytes."""
        key = self.key
        assert key is not None, "a template that draws makes its step random"
        self.drawn = drawn = self.drawn + 1
        return blake2b(b"%s:%s:%d" % (key, what, drawn), digest_size=16)


def rendered(reply: Reply, values: RequestValues) -> Reply:
    """*reply* (its ``{base_url}`` filled already) made for the request of *values*; when
    it cannot be, mockskill's labelled error instead (:func:`not_rendered_reply`)."""
    made = reply.rendered(Reading(values))
    if isinstance(made, NotRendered):
        return not_rendered_reply(made, values)
    return made


def not_rendered_reply(why: NotRendered, values: RequestValues) -> Reply:
    """400 ``MOCKSKILL_TEMPLATE_NOT_RENDERED``: the scenario's answer reads what this request
    does not have (a pointer into a body that is not JSON, a header it lacks), with no
    default. Named as mockskill's, with the scenario, the step and the placeholder."""
    step = None if values.step is None else values.step + 1
    message = (
        f"mockskill could not render the scripted answer: {why.placeholder} has no value"
        f" ({why.why}) and no default"
    )
    details = {
        "made_by": "mockskill: the scenario's template, not the provider it stands for",
        "scenario": values.scenario,
        "step": step,
        **why.details(),
        "fix": 'send the value, or give the placeholder a default: {{NAME | default "x"}}',
    }
    return Reply.error(catalog.tool_error(400, NOT_RENDERED, message, details))
