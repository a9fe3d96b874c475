"""Steps and sequences: the YAML of an endpoint's behaviour → checked model.

An endpoint's behaviour is written as one step, a list of steps, or
``{steps: [...], end: last|cycle|fail}``. A step is a protocol error
(``error: CODE`` with optional overrides), a result (``status``, ``headers``
and a ``json`` or ``text`` body, or bytes: ``body_base64``, ``body_file``,
:mod:`.bodies`), or the skill's descriptor
(``descriptor: true``), or a stream of events (``stream:``, read by :mod:`.streams`);
any of them may wait first (``delay``, ms) and repeat
(``times``). Each is rendered here, once, into a :class:`~mockskill.scenario.model.Reply`;
how it behaves on the wire (waits, faults, keep-alive) is read by :mod:`.wire`.

Every rule of the error chapter that a step could break is checked through
:mod:`mockskill.protocol.catalog`, so a scenario cannot make the server speak a
protocol it does not know.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from ..protocol import catalog
from . import after, bodies, proxy_config, rate_limits, states, streams, waits_and_faults
from .kinds import BODY_KINDS, PLAIN_KINDS, listed
from .model import (
    END_RULES,
    JSON_TYPE,
    TASK_STEP_KINDS,
    TEXT_TYPE,
    Choice,
    EndRule,
    Reply,
    Sequence,
    Step,
)
from .problems import Path, describe
from .reader import MAX_DELAY_MS, Reader
from .template_syntax import (
    ANYWHERE,
    Scope,
    compile_error,
    compile_headers,
    compile_json,
    compile_text,
    reply_template,
)
from .templates import OPEN, JsonTemplate, Template
from .waits_and_faults import BAD as _BAD
from .waits_and_faults import KEEP_ALIVE_KEYS

__all__ = ["BESIDE_TASK", "KEEP_ALIVE_KEYS", "MAX_DELAY_MS", "read_sequence", "read_step"]

STEP_KEYS = (
    "error",
    "status",
    "message",
    "details",
    "retry",
    "headers",
    "json",
    "text",
    "body_base64",
    "body_file",
    "descriptor",
    "delay",
    "execution",
    "hang",
    "dribble",
    "fault",
    "keep_alive",
    "one_of",
    "failure_rate",
    "failure",
    "times",
    "proxy",
    "after",
    "set_state",
    "rate_limited",
    "task",
    "stream",
)
ERROR_ONLY = ("message", "details", "retry")
SEQUENCE_KEYS = ("steps", "end")
RETRY_KEYS = ("suggested_delay_ms", "max_attempts")
_TOKEN = r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$"
"""A header name (compiled by re on the first step with headers, not at import)."""


@dataclass(frozen=True)
class StepContext:
    """What a step may refer to: the skill (if any) and its descriptor."""

    error_context: catalog.Context
    descriptor: bytes | None = None
    """The skill's descriptor, for ``descriptor: true``; None outside a skill."""
    scope: Scope = ANYWHERE
    """What its ``{{...}}`` placeholders may read (a skill's, or a route's and its path's)."""
    tasks: tuple[str, ...] = ()
    """The ``task:`` steps it may be (:data:`~.model.TASK_STEP_KINDS`): ``submit`` in a task
    skill's invoke, ``status`` in its ``task: polls:``; none elsewhere."""


def read_sequence(
    r: Reader,
    value: Any,
    path: Path,
    ctx: StepContext,
    default: Sequence | None = None,
    *,
    ends: tuple[EndRule, ...] = END_RULES,
) -> Sequence | None:
    """An endpoint's sequence, or *default* when the key was not given (*value* is missing).

    *ends*: the end rules it may have (a case's may be ``next`` too)."""
    if value is Reader.MISSING:
        return default
    if isinstance(value, list):
        raw_steps, end, steps_path = value, "last", path
    elif isinstance(value, dict) and "steps" in value:
        if not r.keys(value, path, SEQUENCE_KEYS, required=("steps",)):
            return None
        raw_steps, steps_path = value["steps"], (*path, "steps")
        end = value.get("end", "last")
        if end == "next" and end not in ends:
            r.bad(
                (*path, "end"),
                f"one of {', '.join(ends)}",
                "'next' (a string)",
                "next passes a request on to the next case: only a case's steps may end so",
            )
        else:
            r.among(end, (*path, "end"), ends)
        if not isinstance(raw_steps, list):
            r.bad(steps_path, "a list of steps", describe(raw_steps))
            return None
    elif isinstance(value, dict):
        raw_steps, end, steps_path = [value], "last", None
    else:
        r.bad(
            path,
            "a step (mapping), a list of steps, or {steps: [...], end: ...}",
            describe(value),
        )
        return None
    if not raw_steps:
        r.bad(steps_path or path, "at least one step", "an empty list")
        return None
    steps = []
    for i, raw in enumerate(raw_steps):
        step = read_step(r, raw, path if steps_path is None else (*steps_path, i), ctx)
        if step is not None:
            steps.append(step)
    if len(steps) != len(raw_steps) or end not in ends:
        return None
    return Sequence(tuple(steps), end)


def read_step(r: Reader, raw: Any, path: Path, ctx: StepContext) -> Step | None:
    """One step, checked and rendered; None (with problems recorded) when it is wrong."""
    if not isinstance(raw, dict):
        r.bad(
            path, "a step (a mapping such as {error: AUTH_REQUIRED} or {json: ...})", describe(raw)
        )
        return None
    before = len(r.problems)
    r.keys(raw, path, STEP_KEYS)
    times = r.integer(raw, "times", path, default=1, minimum=1)
    # Beside failure_rate it is the success's (read with it): a failure moves nothing.
    moves = None if "failure_rate" in raw else states.setting(r, raw, path)
    if "one_of" in raw:
        step = _one_of(r, raw, path, ctx)
    elif "failure_rate" in raw:
        step = _failure_rate(r, raw, path, ctx)
    else:
        step = _plain_step(r, raw, path, ctx)
    if len(r.problems) > before or step is None or times is None:
        return None
    return dataclasses.replace(step, times=times, set_state=moves)


def _plain_step(r: Reader, raw: dict[str, Any], path: Path, ctx: StepContext) -> Step | None:
    if "stream" in raw:  # a stream of events (before proxy: a stream does not forward)
        return streams.stream_step(r, raw, path, ctx, read_step)
    if "proxy" in raw:  # forwarded to a real provider
        return proxy_config.proxy_step(r, raw, path, ctx, read_step)
    if "rate_limited" in raw:  # refused: the engine writes the answer per request
        return rate_limits.scripted_step(r, raw, path)
    if "task" in raw:  # a task started or reported: the engine writes the answer per request
        return _task_step(r, raw, path, ctx)
    if "after" in raw:  # the skill ran, then its answer was lost (commit then fail)
        return after.scripted_after(r, raw, path, ctx, read_step, _plain_step)
    kinds = [k for k in BODY_KINDS if k in raw]
    if len(kinds) > 1:
        r.bad(
            (*path, kinds[1]),
            f"one of {listed(BODY_KINDS)} in a step",
            f"{kinds[0]} and {kinds[1]} together",
            "split them into two steps",
            at_key=True,
        )
    elif not any(k in raw for k in PLAIN_KINDS):
        r.bad(path, f"a step with {listed(PLAIN_KINDS)}", describe(raw))
    if "failure" in raw:
        r.bad((*path, "failure"), "failure_rate beside failure", "failure alone", at_key=True)
    headers = _headers(r, raw, path)
    templates = _header_templates(r, headers, path, ctx)
    if templates is None:
        reply = None
    elif "error" in raw:
        reply = _error_reply(r, raw, path, ctx, headers, templates)
    else:
        for key in ERROR_ONLY:
            if key in raw:
                r.bad((*path, key), "error: CODE beside it", f"{key} in a result step", at_key=True)
        reply = _result_reply(r, raw, path, ctx, headers, templates)
    delay = waits_and_faults.delay(r, raw, "delay", path)
    execution = waits_and_faults.delay(r, raw, "execution", path)
    hang = waits_and_faults.hang(r, raw, path)
    dribble = waits_and_faults.dribble(r, raw, path, has_body=bool(kinds))
    fault = waits_and_faults.fault(r, raw, path)
    keep_alive = waits_and_faults.keep_alive(r, raw, path)
    if reply is None or delay is _BAD or execution is _BAD or hang is _BAD:
        return None
    if dribble is _BAD or fault is _BAD or keep_alive is _BAD:
        return None
    if hang is not None and not kinds and "status" not in raw:
        fault = "EMPTY_RESPONSE"  # held, then closed without a word
    return Step(
        reply,
        r.position(path),
        delay=delay,
        execution=execution,
        hang_ms=hang,
        dribble=dribble,
        fault=fault,
        keep_alive=keep_alive,
    )


BESIDE_TASK = ("task", "times", "delay", "set_state", "after")
"""A ``task:`` step's keys: its answer is the task's, made per request by the engine
(``after`` only beside ``task: submit``: the task started, then its 202 lost)."""
_TASK_PLACES = {
    "submit": (
        "a task skill's invoke",
        "give the skill a task: (its invoke then defaults to {task: submit})",
    ),
    "status": (
        "a task's polls:",
        "task: status answers the status URL: write it in the skill's task: polls:",
    ),
}
_TASK_STATUS = {"submit": 202, "status": 200}
"""The status of each ``task:`` step's answer (docs/tasks.md): 202 Accepted, 200."""


def _task_step(r: Reader, raw: dict[str, Any], path: Path, ctx: StepContext) -> Step | None:
    """A step with ``task:`` (its ``times`` and ``set_state`` are read by the caller).

    Its :attr:`~.model.Step.reply` only describes the answer (its status, no body): the
    engine writes the task's JSON, ``Location`` and ``Retry-After`` per request."""
    where = (*path, "task")
    kind = raw["task"]
    if not r.among(kind, where, TASK_STEP_KINDS):
        return None
    if kind not in ctx.tasks:
        place, hint = _TASK_PLACES[kind]
        r.bad(where, f"task: {kind} only in {place}", f"task: {kind} here", hint)
        return None
    others = [k for k in raw if k not in BESIDE_TASK]
    if others:
        expected = f"only {listed(BESIDE_TASK[1:-1], 'and')} beside task"
        if kind == "submit":
            expected += " (and after, which loses the 202 of the task started)"
        r.bad(
            (*path, others[0]),
            expected,
            f"{others[0]} as well",
            "the answer is the task's own; another answer goes in another step",
            at_key=True,
        )
        return None
    if "after" in raw and kind != "submit":
        r.bad(
            (*path, "after"),
            "after only beside task: submit",
            f"after beside task: {kind}",
            "after: loses the answer of a task started; a poll's error is a step of its own",
            at_key=True,
        )
        return None
    delay = waits_and_faults.delay(r, raw, "delay", path)
    if delay is _BAD:
        return None
    reply = Reply.make(_TASK_STATUS[kind], b"", JSON_TYPE)
    if "after" in raw:  # the task is started, then its 202 is lost (commit then fail)
        lost = after.read_after(r, raw["after"], (*path, "after"), ctx, read_step)
        if lost is _BAD:
            return None
        assert isinstance(lost, Step)
        # As scripted_after's: what is sent is after's error, or the 202 with after's fault;
        # ran stands for the 202 (the engine writes it per task, and puts it there).
        sent = lost.reply if "error" in raw["after"] else reply
        return Step(sent, r.position(path), delay=delay, fault=lost.fault, ran=reply, task=kind)
    return Step(reply, r.position(path), delay=delay, task=kind)


def _one_of(r: Reader, raw: dict[str, Any], path: Path, ctx: StepContext) -> Step | None:
    where = (*path, "one_of")
    others = [k for k in raw if k not in ("one_of", "times", "set_state")]
    if others:
        r.bad(
            (*path, others[0]),
            "only times and set_state beside one_of",
            f"{others[0]} as well",
            "put it in each outcome",
            at_key=True,
        )
        return None
    items = raw["one_of"]
    if not isinstance(items, list) or not items:
        r.bad(where, "a list of outcomes, each a step with a weight", describe(items))
        return None
    choices = []
    for i, item in enumerate(items):
        choice = _weighted(r, item, (*where, i), ctx)
        if choice is not None:
            choices.append(choice)
    if len(choices) != len(items):
        return None
    return Step(choices[0].step.reply, r.position(path), choices=tuple(choices))


def _weighted(r: Reader, item: Any, path: Path, ctx: StepContext) -> Choice | None:
    if not isinstance(item, dict):
        r.bad(path, "an outcome: a step with a weight", describe(item))
        return None
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < 1e9:
        r.bad((*path, "weight"), "a positive number below 1000000000", describe(weight))
        return None
    inner = {k: v for k, v in item.items() if k != "weight"}
    if not single_step(r, inner, path, "an outcome"):
        return None
    step = read_step(r, inner, path, ctx)
    return None if step is None else Choice(float(weight), step)


def single_step(r: Reader, raw: Any, path: Path, what: str) -> bool:
    """Whether *raw* is one plain step: no nested randomness, no ``times``."""
    if not isinstance(raw, dict):
        return True  # read_step says what is wrong with it
    for nested in ("one_of", "failure_rate", "times"):
        if nested in raw:
            r.bad((*path, nested), f"no {nested} in {what}", nested, at_key=True)
            return False
    return True


def _failure_rate(r: Reader, raw: dict[str, Any], path: Path, ctx: StepContext) -> Step | None:
    rate = raw["failure_rate"]
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < 1:
        r.bad((*path, "failure_rate"), "a probability above 0 and below 1", describe(rate))
        return None
    failure_raw = raw.get("failure", {"error": "ENDPOINT_UNREACHABLE"})
    if not single_step(r, failure_raw, (*path, "failure"), "the failure"):
        return None
    failure = read_step(r, failure_raw, (*path, "failure"), ctx)
    success_raw = {k: v for k, v in raw.items() if k not in ("failure_rate", "failure", "times")}
    success = read_step(r, success_raw, path, ctx)
    if failure is None or success is None:
        return None
    choices = (Choice(float(rate), failure), Choice(1.0 - rate, success))
    return Step(success.reply, r.position(path), choices=choices)


def _headers(r: Reader, raw: dict[str, Any], path: Path) -> dict[str, str]:
    headers = raw.get("headers", {})
    if not isinstance(headers, dict):
        r.bad((*path, "headers"), "a mapping of header names to values", describe(headers))
        return {}
    out = {}
    for name, value in headers.items():
        where = (*path, "headers", name)
        if not isinstance(name, str) or not re.fullmatch(_TOKEN, name):
            r.bad(where, "a header name (letters, digits, -)", describe(name), at_key=True)
        elif name.lower() in SERVER_HEADERS:
            r.bad(
                where,
                "a header a step may set",
                f"{name}, which {SERVER_HEADERS[name.lower()]}",
                "remove it (transport faults: fault: TRUNCATED_BODY, MALFORMED_RESPONSE_CHUNK ...)",
                at_key=True,
            )
        elif isinstance(value, (dict, list)) or value is None:
            r.bad(where, "a header value (string or number)", describe(value))
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            problem = _header_value_problem(text)
            if problem:
                r.bad(where, *problem)
            else:
                out[name] = text
    return out


def _header_templates(
    r: Reader, headers: dict[str, str], path: Path, ctx: StepContext
) -> dict[str, Template] | None:
    """The ``{{...}}`` templates of *headers*, by name (a value that turns out constant,
    ``\\{{`` unescaped, is written back into *headers*); None (with problems) if one is wrong."""
    if not any(OPEN in value for value in headers.values()):
        return {}  # (most steps)
    templates = compile_headers(r, headers, path, ctx.scope)
    if templates is None:
        return None
    for name, template in list(templates.items()):
        if template.constant is not None:
            headers[name] = template.constant
            del templates[name]
        elif name.lower() == "content-type":
            r.bad(
                (*path, "headers", name),
                "a Content-Type without placeholders",
                describe(headers[name]),
                "the type of a body does not depend on the request",
            )
            return None
    return templates


SERVER_HEADERS = {
    "content-length": "the server sets from the body it sends",
    "transfer-encoding": "the server sets from how it sends the body",
    "connection": "is the server's, about this connection (hop-by-hop)",
    "keep-alive": "is the server's, about this connection (hop-by-hop)",
    "proxy-connection": "is about one connection (hop-by-hop)",
    "te": "a client sends, not a server",
    "trailer": "announces trailers the server never sends",
    "upgrade": "switches protocols, which the server never does",
}
"""Framing and hop-by-hop headers (RFC 9110 §7.6.1, RFC 9112 §6): a step cannot set them
without the answer contradicting how it is sent (two framings, a connection that lies)."""

_WIRE = "a header value that can go on the wire (Latin-1 text, no control characters)"
_CONTROL = r"[\x00-\x08\x0a-\x1f\x7f]"  # compiled by re on the first header value read


def _header_value_problem(text: str) -> tuple[str, str, str] | None:
    """(expected, found, hint) when *text* cannot be sent as a header value, else None.

    HTTP/1.1 header values are bytes; the server writes them as Latin-1
    (RFC 9110 §5.5: visible characters, spaces and tabs, and obs-text).
    """
    control = re.search(_CONTROL, text)
    if control is not None:
        char = control.group()
        if char in "\r\n":
            return "a header value on one line", "a line break", ""
        return (
            _WIRE,
            f"the control character U+{ord(char):04X} at position {control.start() + 1}",
            "header values hold visible characters, spaces and tabs",
        )
    for i, char in enumerate(text):
        if ord(char) > 0xFF:
            return (
                _WIRE,
                f"{char!r} (U+{ord(char):04X}) at position {i + 1}, which is not Latin-1",
                "header values are bytes; percent-encode the text (RFC 8187: "
                "filename*=UTF-8''%E6%97%A5), or put it in the body",
            )
    return None


def _error_reply(
    r: Reader,
    raw: dict[str, Any],
    path: Path,
    ctx: StepContext,
    headers: dict[str, str],
    templates: dict[str, Template],
) -> Reply | None:
    code = raw["error"]
    if not r.among(code, (*path, "error"), catalog.CODES, shown=catalog.SERVED_CODES):
        return None
    category = catalog.CATEGORIES[code]
    if not category.sent_by_provider:
        r.bad(
            (*path, "error"),
            "an error a provider sends (" + ", ".join(catalog.SERVED_CODES) + ")",
            f"{code}, which the consumer's own Schema Validator raises",
            "to exercise it, serve an invalid descriptor (raw_descriptor, or descriptor"
            " with a broken field)",
        )
        return None
    ok = True
    for name in headers:
        if name.lower() == "retry-after":
            r.bad(
                (*path, "headers", name),
                "no Retry-After header in an error step",
                describe(headers[name]),
                "it is derived from retry.suggested_delay_ms (seconds, rounded up); set retry",
                at_key=True,
            )
            ok = False
    status = raw.get("status")
    if status is not None:
        problem = catalog.status_problem(code, status) if _is_int(status) else None
        if not _is_int(status) or problem:
            allowed = " or ".join(str(s) for s in category.statuses)
            r.bad((*path, "status"), f"HTTP {allowed} for {code}", describe(status), problem or "")
            ok = False
    message = raw.get("message")
    if message is not None and not isinstance(message, str):
        r.bad((*path, "message"), "a string", describe(message))
        ok = False
    details = raw.get("details")
    if details is not None and not isinstance(details, dict):
        r.bad(
            (*path, "details"), "a mapping (merged over the category's details)", describe(details)
        )
        ok = False
    elif details is not None and r.json_bytes(details, (*path, "details")) is None:
        ok = False
    retry: catalog.Retry | object | None = catalog.KEEP
    if "retry" in raw:
        retry = _retry(r, raw["retry"], (*path, "retry"), code)
        ok = ok and retry is not _BAD
    if not ok:
        return None
    if message is None and details:  # a default message may repeat a templated detail
        default = catalog.render(code, ctx.error_context, details=details).body
        written = json.loads(default)["error"]["message"]
        message = written if OPEN in written else None
    holes = compile_error(r, message, details, path, ctx.scope)
    if holes is None:
        return None
    rendered = catalog.render(
        code,
        ctx.error_context,
        status=status,
        message=message,
        details=details,
        retry=retry,
        headers=headers,
    )
    body = None
    if holes.holes:  # rendered again with stand-ins, which the body's template fills
        with_holes = catalog.render(
            code,
            ctx.error_context,
            status=status,
            message=holes.message,
            details=holes.details,
            retry=retry,
            headers=headers,
        )
        body = holes.body(with_holes.body)
    reply = Reply.error(rendered)
    return _templated(reply, body, templates)


def _templated(
    reply: Reply, body: JsonTemplate | Template | None, templates: dict[str, Template]
) -> Reply:
    """*reply* with its ``{{...}}`` templates (most replies have none)."""
    made = reply_template(body, reply.headers, templates)
    return reply if made is None else dataclasses.replace(reply, template=made)


def _retry(r: Reader, value: Any, path: Path, code: str) -> catalog.Retry | object | None:
    if value is None:
        return None
    problem = catalog.retry_problem(code)
    if problem:
        r.bad(path, "no retry advice (or retry: null)", describe(value), problem)
        return _BAD
    if not isinstance(value, dict):
        r.bad(path, "a mapping {suggested_delay_ms: N, max_attempts: N}", describe(value))
        return _BAD
    if not r.keys(value, path, RETRY_KEYS):
        return _BAD
    default = catalog.CATEGORIES[code].retry
    assert default is not None
    # At most the longest wait the server may script: advice a consumer follows
    # is a wait in its test run too, and a bound keeps Retry-After a sane number.
    delay = r.integer(
        value,
        "suggested_delay_ms",
        path,
        default=default.suggested_delay_ms,
        minimum=0,
        maximum=r.max_delay_ms,
        unit="ms",
    )
    attempts = r.integer(value, "max_attempts", path, default=default.max_attempts, minimum=1)
    if delay is None or attempts is None:
        return _BAD
    return catalog.Retry(delay, attempts)


def _result_reply(
    r: Reader,
    raw: dict[str, Any],
    path: Path,
    ctx: StepContext,
    headers: dict[str, str],
    templates: dict[str, Template],
) -> Reply | None:
    written = raw.get("status", 200)
    if _is_int(written) and 100 <= written < 200:
        # A 1xx is interim: a client reads the real answer after it, and a keep-alive
        # client then takes this answer for its next request's.
        r.bad(
            (*path, "status"),
            "a whole number from 200 to 599",
            describe(written),
            "a 1xx status is interim, not a final answer (clients would wait for the real one)",
        )
        return None
    status = r.integer(raw, "status", path, default=200, minimum=200, maximum=599)
    content_type = headers.pop("Content-Type", None)
    for name in list(headers):
        if name.lower() == "content-type":
            content_type = headers.pop(name)
    body: bytes
    template: JsonTemplate | Template | None = None
    if "json" in raw:
        template = compile_json(r, raw["json"], (*path, "json"), ctx.scope)
        if template is None:
            return None
        constant = template.constant  # (\{{ unescaped when nothing is a placeholder)
        body = json.dumps(raw["json"]).encode() if constant is None else constant
        kind = JSON_TYPE
    elif "text" in raw:
        text = raw["text"]
        if not isinstance(text, str):
            r.bad((*path, "text"), "a string (use json: for structured bodies)", describe(text))
            return None
        if OPEN in text:
            template = compile_text(r, text, (*path, "text"), scope=ctx.scope)
            if template is None:
                return None
            text = text if template.constant is None else template.constant
        body, kind = text.encode(), TEXT_TYPE
    elif "body_base64" in raw or "body_file" in raw:
        key = "body_base64" if "body_base64" in raw else "body_file"
        read = bodies.base64_body if key == "body_base64" else bodies.file_body
        given = read(r, raw[key], (*path, key))
        if given is None or status is None:
            return None
        return Reply.make(status, given, content_type or bodies.BYTES_TYPE, headers, verbatim=True)
    elif "descriptor" in raw:
        wanted = "true (serve the skill's descriptor)"
        if raw["descriptor"] is not True:
            r.bad((*path, "descriptor"), wanted, describe(raw["descriptor"]))
            return None
        if r.boolean(True, (*path, "descriptor"), wanted) is None:  # an unquoted yes or on
            return None
        if ctx.descriptor is None:
            r.bad(
                (*path, "descriptor"),
                "a step of a skill's endpoint",
                "a free route",
                "routes have no descriptor; use json:",
            )
            return None
        body, kind = ctx.descriptor, JSON_TYPE
    else:
        body, kind = b"", TEXT_TYPE
    if status is None:
        return None
    if "json" in raw and status >= 400 and ctx.error_context.skill_id is not None:
        _check_error_body(r, raw["json"], (*path, "json"))
    return _templated(Reply.make(status, body, content_type or kind, headers), template, templates)


def _check_error_body(r: Reader, value: Any, path: Path) -> None:
    """A warning when a skill's scripted JSON error answer is not in the unified body."""
    problem = catalog.error_body_problem(value)
    if problem is not None:
        r.warn(
            path,
            "the unified error body {error: {code, message, details, retry}}",
            describe(value),
            f"{problem}, and a consumer reads error.code and error.message (error: CODE writes"
            " the body); keep it only to script a provider that breaks the protocol",
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
