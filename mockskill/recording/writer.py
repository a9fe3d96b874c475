"""Recorded exchanges -> a scenario file: YAML text the project's own loader accepts.

:func:`write` turns a recording's exchanges into one scenario:

- a skill per skill id seen: ``GET /skills/{id}`` gives its ``raw_descriptor``
  (the provider's, its URLs put back to ``{base_url}``) and its ``describe``
  sequence, ``POST /skills/{id}/invoke`` its ``invoke``; a free route per
  other method and path. ``GET /skills`` needs nothing: mockskill lists the
  skills it serves (its ``scenario`` field names the recording's scenario);
- the requests of one endpoint that are alike (query, body, the headers that
  matter) play their answers as a sequence, in the order seen (``end:
  last``); requests that differed become ``cases`` whose ``when:`` tells
  them apart (:mod:`.telling`), each with its own sequence
  (:mod:`.endpoints`);
- each answer's measured upstream latency becomes its step's ``delay``
  (rounded ms), unless asked not to;
- a stream relayed (SSE, NDJSON) becomes a ``stream:`` step, its events with their
  measured pauses (:mod:`.stream_steps`), its head's latency the step's ``delay``;
- secrets stay out (:mod:`.secrets`): a protected skill gets ``requires:``
  and the scenario ``auth:`` credentials that accept the consumer's by their
  SHA-256 digest; the header comment names what was redacted, never a value.

The text is loaded with :func:`~mockskill.scenario.loader.load_text` before it
is returned; a recording that does not load is a :class:`RecordingError`
(with every problem), and the caller keeps the exchanges.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

import yaml

from ..engine.conditions import ABSENT
from ..engine.exchange import Exchange
from ..protocol.catalog import BASE_URL, TOKEN_PATH
from ..scenario.cases import BODILESS
from ..scenario.loader import SCENARIO_NAME, load_text
from ..scenario.model import ScenarioSet
from ..scenario.problems import Problem, ScenarioError
from ..scenario.reader import MAX_DELAY_MS
from ..scenario.source import MAX_FILE_BYTES
from . import request_cases
from .answers import answer_step
from .echoes import templated
from .endpoints import DEFAULT_SESSION, MAX_CASES, SESSION_HEADER, Endpoint, played
from .error_steps import Errors
from .rebase import Rebase
from .replay_credentials import Access
from .secrets import (
    MIN_SCRUBBED,
    QUERY_SECRETS,
    REDACTED,
    Secrets,
    form_secrets,
    is_secret_header,
    presented,
)
from .stream_steps import stream_step

__all__ = [
    "DEFAULT_SESSION",
    "IGNORED_HEADERS",
    "MAX_CASES",
    "SESSION_HEADER",
    "RecordingError",
    "Written",
    "write",
]

_DESCRIBE = re.compile(r"/skills/([A-Za-z0-9][A-Za-z0-9._~-]*)")
_INVOKE = re.compile(r"/skills/([A-Za-z0-9][A-Za-z0-9._~-]*)/invoke")
IGNORED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
        "user-agent",
        "accept",
        "accept-encoding",
        "accept-language",
        "mockskill-session",
        "mockskill-error",
        "forwarded",
        "via",
        "date",
        "expect",
        "cache-control",
        "pragma",
        "origin",
        "referer",
        "traceparent",
        "tracestate",
        "x-request-id",
        "x-correlation-id",
    }
)
"""Request headers a case never tests: the transport's, the client's own, per-request ids."""


class _Dumper(yaml.SafeDumper):
    """Safe YAML, lists indented under their key as the README writes them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


class RecordingError(Exception):
    """A recording that cannot become a valid scenario file; its exchanges are kept."""

    def __init__(self, why: str, problems: Iterable[Problem] = ()) -> None:
        self.why = why
        self.problems = tuple(problems)
        lines = [why, *(str(p) for p in self.problems)]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Written:
    """A recording as a checked scenario file."""

    text: str
    scenarios: ScenarioSet
    redacted: tuple[str, ...]
    """What was left out as a secret, by name (``header Authorization``)."""
    count: int
    """Exchanges it was made from."""
    notes: tuple[str, ...] = ()
    """What could not be kept as it came (said in the file's header, and by whoever stops
    the recording: the console, the admin's answer)."""
    echoed: int = 0
    """How many times a secret value was found echoed elsewhere and replaced."""


@dataclass
class _Skill:
    id: str
    descriptor: Any = ABSENT
    describe: Endpoint = field(default_factory=lambda: Endpoint(("GET",)))
    invoke: Endpoint = field(default_factory=lambda: Endpoint(("POST",)))
    credentials: dict[tuple[str, str], None] = field(default_factory=dict)
    """(kind, secret) presented on invocations that succeeded."""
    open_success: bool = False
    """Whether an invocation without credentials succeeded (then nothing is required)."""


def write(
    exchanges: Iterable[Exchange],
    *,
    name: str = "recording",
    target: str | None = None,
    delays: bool = True,
    dropped: int = 0,
    at: float | None = None,
    max_delay_ms: int = MAX_DELAY_MS,
) -> Written:
    """The scenario file of *exchanges* (in the order they came), checked by the loader.

    *dropped* (exchanges past the recording's bound) is said in the header;
    *delays* False leaves the measured latencies out. Raises :class:`RecordingError`.
    """
    if not SCENARIO_NAME.fullmatch(name):
        raise RecordingError(f"{name!r} is not a scenario name (letters, digits, . _ ~ -)")
    recorded = list(exchanges)
    if not recorded:
        raise RecordingError("nothing was recorded: no request was forwarded to the provider")
    build = _Build(delays=delays, max_delay_ms=max_delay_ms)
    for exchange in recorded:
        build.add(exchange)
    data = build.scenario(name, target or (recorded[0].upstream if recorded else None))
    data = build.secrets.scrub(data)  # a secret echoed anywhere: a body, a header, a path
    if build.secrets.recompressed:
        build.notes.setdefault(
            "a compressed answer held a secret: it was uncompressed, scrubbed and compressed"
            " anew, so its bytes differ from the provider's"
        )
    if build.secrets.short:
        build.notes.setdefault(
            f"a secret value shorter than {MIN_SCRUBBED} characters is left out where it was"
            " sent, but not searched for elsewhere (it would replace ordinary words)"
        )
    when = datetime.datetime.fromtimestamp(at if at is not None else _now(recorded), datetime.UTC)
    header = build.header(target, when, len(recorded), dropped)
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    text = "".join(f"# {line}\n" if line else "#\n" for line in header) + body
    if len(text.encode()) > MAX_FILE_BYTES:
        raise RecordingError(
            f"the recording's file would be {len(text.encode())} bytes, over the"
            f" {MAX_FILE_BYTES} a scenario file may be: record less (a shorter run)"
        )
    try:
        scenarios = load_text(text, f"{name}.yaml", max_delay_ms=max_delay_ms)
    except ScenarioError as exc:
        raise RecordingError(
            "the recording did not make a valid scenario file (its exchanges are kept)",
            exc.problems,
        ) from exc
    return Written(
        text,
        scenarios,
        tuple(build.secrets.names),
        len(recorded),
        tuple(build.notes),
        build.secrets.scrubbed,
    )


def _now(recorded: list[Exchange]) -> float:
    return recorded[0].at if recorded else datetime.datetime.now(datetime.UTC).timestamp()


class _Build:
    """The scenario being put together, exchange after exchange."""

    def __init__(self, *, delays: bool, max_delay_ms: int) -> None:
        self.delays = delays
        self.max_delay_ms = max_delay_ms
        self.secrets = Secrets()
        self.skills: dict[str, _Skill] = {}
        self.routes: dict[tuple[str, str], Endpoint] = {}
        self.access = Access(self.secrets)
        self.errors = Errors()
        self.left_out: dict[str, int] = {}
        self.notes: dict[str, None] = {}

    # -- reading exchanges

    def add(self, exchange: Exchange) -> None:
        path, _, query = exchange.target.partition("?")
        method = exchange.method.upper()
        rewrite = Rebase(exchange)
        self.secrets.harvest(exchange)  # every exchange's: its answer may echo another's
        if method == "HEAD":
            self._leave_out("HEAD requests (a replay answers HEAD from the GET)")
            return
        if path == TOKEN_PATH and method == "POST":
            self.access.token_request(exchange)
            self._leave_out(f"{TOKEN_PATH} requests (mockskill's own token endpoint answers them)")
            return
        step = stream_step(exchange, rewrite, self.secrets, self.notes, delays=self.delays)
        if step is not None and exchange.stream is not None:  # its head's latency, then events'
            latency = exchange.stream.head_ms
        else:
            step = answer_step(exchange, rewrite, self.secrets, self.notes)
            latency = exchange.upstream_ms
        if (m := _DESCRIBE.fullmatch(path)) and method == "GET":
            skill = self._skill(m[1])
            step = self.errors.step(step, {"skill": skill.id, "endpoint": "describe"})
            step = self._descriptor_step(skill, step)
            self._into(skill.describe, exchange, query, step, latency)
        elif (m := _INVOKE.fullmatch(path)) and method == "POST":
            skill = self._skill(m[1])
            step = self.errors.step(step, {"skill": skill.id, "endpoint": "invoke"})
            step = templated(step, exchange)
            credential = presented(exchange.headers)
            if 200 <= exchange.status < 300:
                if credential is None:
                    skill.open_success = True
                else:
                    skill.credentials.setdefault(credential)
            self._into(skill.invoke, exchange, query, step, latency, credential)
        elif path == "/skills":
            self._leave_out("GET /skills (mockskill lists the skills it serves itself)")
        elif path.startswith(("/skills/", "/__admin", TOKEN_PATH)) or "<" in unquote(path):
            self._leave_out(f"{method} requests outside what a scenario can script ({path})")
        else:
            route = unquote(path)
            step = self.errors.step(step, {"path": route, "method": method})
            step = templated(step, exchange)
            endpoint = self.routes.setdefault((method, route), Endpoint((method,)))
            self._into(endpoint, exchange, query, step, latency)

    def _leave_out(self, what: str) -> None:
        self.left_out[what] = self.left_out.get(what, 0) + 1

    def _skill(self, skill_id: str) -> _Skill:
        return self.skills.setdefault(skill_id, _Skill(skill_id))

    def _into(
        self,
        endpoint: Endpoint,
        exchange: Exchange,
        query: str,
        step: dict[str, Any],
        latency: float,
        credential: tuple[str, str] | None = None,
    ) -> None:
        endpoint.shapes.append(self._shape(exchange, query, endpoint.methods[0]))
        endpoint.steps.append(step)
        endpoint.delays.append(latency if self.delays else None)
        endpoint.credentials.append(credential)
        endpoint.sessions.append(exchange.session)

    def _shape(self, exchange: Exchange, query: str, method: str) -> request_cases.Shape:
        headers: dict[str, str] = {}
        for name, value in exchange.headers:
            lower = name.lower()
            if is_secret_header(name):
                self.secrets.header(name)
            elif lower not in IGNORED_HEADERS and not lower.startswith("x-forwarded-"):
                headers[lower] = f"{headers[lower]}, {value}" if lower in headers else value
        pairs = parse_qsl(query, keep_blank_values=True)
        for key, _ in pairs:
            if key.lower() in QUERY_SECRETS:
                self.secrets.names.setdefault(f"query parameter {key}")
        pairs = [(k, v) for k, v in pairs if k.lower() not in QUERY_SECRETS]
        if method in BODILESS:  # (no condition may test a body there)
            return request_cases.shape_of(pairs, headers, ABSENT, None)
        body: Any = ABSENT
        text: str | None = None
        try:
            body = self.secrets.fields_out(json.loads(exchange.body)) if exchange.body else ABSENT
        except (ValueError, UnicodeDecodeError, RecursionError):
            body = ABSENT
        if body is ABSENT:
            text = exchange.body.decode("utf-8", "replace")
            if form_secrets(text, self.secrets):
                text = None  # the raw body holds a secret: no case may test it
        return request_cases.shape_of(pairs, headers, body, text)

    # -- answers as steps

    def _descriptor_step(self, skill: _Skill, step: dict[str, Any]) -> dict[str, Any]:
        """The first descriptor answered becomes the skill's; answering it is ``descriptor:
        true``."""
        document = step.get("json", ABSENT)
        if "status" in step or not isinstance(document, dict):
            return step
        endpoint = document.get("endpoint")
        if isinstance(endpoint, dict) and isinstance(endpoint.get("url"), str):
            # As the proxy showed it to the consumer: on this server, its path kept
            # (whichever host the provider named).
            url = endpoint["url"]
            origin = re.match(r"^https?://[^/?#]*", url)
            if origin is not None:
                document = {
                    **document,
                    "endpoint": {**endpoint, "url": BASE_URL + url[origin.end() :]},
                }
        if skill.descriptor is ABSENT:
            skill.descriptor = document
        if document == skill.descriptor and set(step) == {"json"}:
            return {"descriptor": True}
        return step

    # -- the scenario

    def scenario(self, name: str, target: str | None) -> dict[str, Any]:
        data: dict[str, Any] = {"name": name}
        data["description"] = f"Recorded from {target or 'a proxied provider'} by mockskill"
        skills = [self._skill_data(skill) for skill in self.skills.values()]
        auth = self.access.auth()
        if auth:
            data["auth"] = auth
        if skills:
            data["skills"] = skills
        routes = []
        for (method, path), endpoint in self.routes.items():
            route: dict[str, Any] = {"path": path}
            if method != "GET":
                route["method"] = method
            route.update(self._endpoint(endpoint))
            routes.append(route)
        if routes:
            data["routes"] = routes
        return data

    def _skill_data(self, skill: _Skill) -> dict[str, Any]:
        data: dict[str, Any] = {"id": skill.id}
        if skill.descriptor is not ABSENT:
            data["raw_descriptor"] = skill.descriptor
        # What the provider answered each consumer version is in the recording: a replay
        # plays it, and refuses none of them itself.
        data["accepts"] = ">=0.0.0"
        open_success = skill.open_success
        requirement = (
            None if open_success else self.access.requirement(skill.credentials, skill.descriptor)
        )
        if requirement is not None:
            data["requires"] = requirement
        if skill.describe.steps:
            data["describe"] = self._endpoint(skill.describe)
        invoke = skill.invoke
        if requirement is not None:  # the replay refuses the others itself, as they were
            invoke = invoke.only([c in skill.credentials for c in invoke.credentials])
        if invoke.steps:
            data["invoke"] = self._endpoint(invoke)
        return data

    def _endpoint(self, endpoint: Endpoint) -> dict[str, Any]:
        return played(
            endpoint, delays=self.delays, max_delay_ms=self.max_delay_ms, notes=self.notes
        )

    def header(
        self, target: str | None, when: datetime.datetime, count: int, dropped: int
    ) -> list[str]:
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        lines = [
            f"Recorded by mockskill from {target or 'a proxied provider'} at {stamp}:"
            f" {count} exchange{'s' if count != 1 else ''}.",
        ]
        if dropped:
            lines.append(
                f"{dropped} more exchange{'s were' if dropped != 1 else ' was'} dropped past"
                " the recording's bound: their answers are not in this file."
            )
        if self.secrets.names:
            lines.append("Redacted (names only; no value is in this file):")
            lines += [f"  {what}" for what in self.secrets.names]
        if self.secrets.scrubbed:
            lines.append(
                f"Secret values echoed elsewhere (answers' bodies and headers, paths) are"
                f" replaced by {REDACTED}: {self.secrets.scrubbed} time"
                f"{'s' if self.secrets.scrubbed != 1 else ''}."
            )
        if self.access.scopes_for or self.access.clients:
            lines.append("A replay accepts the credentials the consumer presented by their")
            lines.append("SHA-256 digest (auth: *_sha256), without this file holding them.")
        if self.secrets.stand_ins:
            lines.append("Access tokens in answers are replaced by stand-ins (recorded-token-N)")
            lines.append("that a replay hands out and accepts where the real ones were used.")
        for what, n in self.left_out.items():
            lines.append(f"Not recorded as steps: {n} {what}.")
        lines += [f"Note: {note}." for note in self.notes]
        lines.append(
            "Delays are the measured upstream latencies (rounded ms)."
            if self.delays
            else "Measured latencies were left out (--no-delay)."
        )
        return lines
