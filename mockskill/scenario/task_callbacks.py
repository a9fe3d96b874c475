"""A task's ``callback:`` — where its state changes are pushed, signed, retried → checked model.

:func:`read_callback` reads ``task: callback:`` (docs/scenarios.md, "Callbacks") into a
frozen :class:`~.model.TaskCallback`: where the invoke carries the receiver's URL
(``url: {header: NAME}`` or ``url: {body: /POINTER}``: the consumer names its receiver,
the scenario never does), the HMAC ``secret`` and the header its signature goes in, how
often and how patiently a delivery is tried (``attempts``, ``backoff``, ``timeout``), the
statuses pushed (``on:``) and the faults the skill's tasks get in turn (``fault:``,
``late_by``). Durations are read by :mod:`.durations`, a pointer by :mod:`.when`'s
parser, as everywhere else. Whether a given URL may be called is the server's question
(:mod:`mockskill.engine.callback_hosts`), asked when an invoke carries one.
"""

from __future__ import annotations

import re
from typing import Any

from .durations import read_duration
from .kinds import listed
from .model import CALLBACK_FAULTS, TASK_STATUSES, TaskCallback
from .problems import Path, describe
from .reader import Reader
from .source import Position
from .when import parse_pointer

__all__ = [
    "CALLBACK_KEYS",
    "MAX_ATTEMPTS",
    "PUSHED_STATUSES",
    "SET_BY_MOCKSKILL",
    "URL_SOURCES",
    "read_callback",
]

CALLBACK_KEYS = (
    "url",
    "secret",
    "signature_header",
    "attempts",
    "backoff",
    "timeout",
    "on",
    "fault",
    "late_by",
)
URL_SOURCES = ("header", "body")
"""Where an invoke may carry the receiver's URL: a request header, or a string in its
JSON body at a pointer."""
MAX_ATTEMPTS = 100
"""The most deliveries of one change (a receiver down for longer is not coming back)."""
PUSHED_STATUSES = tuple(status for status in TASK_STATUSES if status != "submitted")
"""The statuses a callback may push: every one a task reaches after its submit, which the
invoke's 202 answered itself."""
SET_BY_MOCKSKILL = (
    "content-type",
    "content-length",
    "host",
    "connection",
    "transfer-encoding",
    "mockskill-task",
)
"""Headers every delivery sets itself: the signature cannot go in one of them."""
_DEFAULTS = TaskCallback(url_from=("header", ""), where=Position("", 0, 0))
"""A callback with every default: what a ``callback:`` leaves out is read from it."""
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name: an HTTP token."""
_KINDS = {
    type(None): "null",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "a mapping",
}
"""What a secret that is not a string was, said without its value."""
_WHERE_FROM = "{header: NAME} or {body: /POINTER} (where the invoke carries the receiver's URL)"


def read_callback(r: Reader, value: Any, path: Path) -> TaskCallback | None:
    """A task's ``callback:`` at *path*; None when the value is null, or (with problems
    recorded) when it is wrong."""
    if value is None:
        return None
    raw = r.mapping(
        value, path, "a callback: a mapping with url: {header: NAME} and secret: (and more)"
    )
    if raw is None:
        return None
    before = len(r.problems)
    r.keys(raw, path, CALLBACK_KEYS)
    url_from = _url_from(r, raw, path)
    secret = _secret(r, raw, path)
    header = _signature_header(r, raw, path)
    attempts = r.integer(
        raw, "attempts", path, default=_DEFAULTS.attempts, minimum=1, maximum=MAX_ATTEMPTS
    )
    backoff = _duration(r, raw, "backoff", path, _DEFAULTS.backoff_ms)
    timeout = _duration(r, raw, "timeout", path, _DEFAULTS.timeout_ms)
    on = _on(r, raw, path)
    faults = _faults(r, raw, path)
    late = _late_by(r, raw, path, faults)
    if len(r.problems) > before:
        return None
    if url_from is None or secret is None or header is None or attempts is None:
        return None  # pragma: no cover - each None came with a problem
    if backoff is None or timeout is None or on is None or faults is None or late is None:
        return None  # pragma: no cover - each None came with a problem
    return TaskCallback(
        url_from=url_from,
        where=r.position(path),
        signature_header=header,
        secret=secret,
        attempts=attempts,
        backoff_ms=backoff,
        timeout_ms=timeout,
        on=on,
        faults=faults,
        late_ms=late,
    )


def _url_from(r: Reader, raw: dict[str, Any], path: Path) -> tuple[str, str] | None:
    where = (*path, "url")
    if "url" not in raw:
        r.bad(
            path,
            f"the key 'url': {_WHERE_FROM}",
            "it missing",
            "the consumer names its receiver when it invokes: url: {header: X-Callback-Url}",
        )
        return None
    value = raw["url"]
    if not isinstance(value, dict):
        hint = ""
        if isinstance(value, str):
            hint = (
                "the scenario does not name the receiver, the consumer does: say where its"
                " invoke carries the URL, e.g. url: {header: X-Callback-Url}"
            )
        r.bad(where, _WHERE_FROM, describe(value), hint)
        return None
    if not r.keys(value, where, URL_SOURCES):
        return None
    if len(value) != 1:
        r.bad(
            where,
            _WHERE_FROM,
            "both" if value else "an empty mapping",
            "the URL comes from one place: keep header: or body:" if value else "",
        )
        return None
    [(source, name)] = value.items()
    if source == "header":
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            r.bad((*where, "header"), "a header name (letters, digits, -)", describe(name))
            return None
        return ("header", name)
    pointer = parse_pointer(name) if isinstance(name, str) else None
    if pointer is None or pointer == ():
        hint = ""
        if isinstance(name, str) and name and not name.startswith("/"):
            hint = f"a JSON Pointer starts with /: /{name.replace('.', '/')}"
        elif name == "":
            hint = "'' is the whole body; point at the string that is the URL"
        r.bad(
            (*where, "body"),
            "a JSON Pointer to the URL in the invoke's body: /callback/url",
            describe(name),
            hint,
        )
        return None
    return ("body", name)


def _secret(r: Reader, raw: dict[str, Any], path: Path) -> str | None:
    """The HMAC key: required, and not shown back in a problem (it is a secret)."""
    if "secret" not in raw:
        r.bad(
            path,
            "the key 'secret' (the HMAC-SHA256 key every delivery is signed with)",
            "it missing",
            "the receiver checks each delivery's signature with the same secret",
        )
        return None
    value = raw["secret"]
    if not isinstance(value, str):
        found = _KINDS.get(type(value), "a value") + (", not a string" if value is not None else "")
        r.bad((*path, "secret"), "a secret: a non-empty string", found, "quote it")
        return None
    if not value.strip():
        r.bad(
            (*path, "secret"),
            "a secret: a non-empty string",
            "an empty string",
            "a signature under an empty key proves nothing",
        )
        return None
    return value


def _signature_header(r: Reader, raw: dict[str, Any], path: Path) -> str | None:
    value = raw.get("signature_header", _DEFAULTS.signature_header)
    where = (*path, "signature_header")
    if not isinstance(value, str) or not _HEADER_NAME.fullmatch(value):
        r.bad(where, "a header name (letters, digits, -)", describe(value))
        return None
    if value.lower() in SET_BY_MOCKSKILL:
        r.bad(
            where,
            "a header of its own for the signature",
            f"{value}, which every delivery sets itself",
            f"the default is {_DEFAULTS.signature_header}",
        )
        return None
    return value


def _duration(r: Reader, raw: dict[str, Any], key: str, path: Path, default: int) -> int | None:
    if key not in raw:
        return default
    return read_duration(r, raw[key], (*path, key), minimum=1, maximum=r.max_delay_ms)


def _on(r: Reader, raw: dict[str, Any], path: Path) -> tuple[str, ...] | None:
    """The statuses pushed, in the order a task reaches them (each once)."""
    if "on" not in raw:
        return _DEFAULTS.on
    where = (*path, "on")
    value = raw["on"]
    if not isinstance(value, list) or not value:
        r.bad(
            where,
            f"a list of the statuses to push: {listed(PUSHED_STATUSES)}",
            describe(value),
            "leave on: out to push every one; leave callback: out to push none",
        )
        return None
    ok = True
    for i, status in enumerate(value):
        if status == "submitted":
            r.bad(
                (*where, i),
                f"a status a task reaches after its submit: {listed(PUSHED_STATUSES)}",
                "'submitted'",
                "the invoke's 202 answers the submit itself: nothing is pushed for it",
            )
            ok = False
        elif not r.among(status, (*where, i), PUSHED_STATUSES):
            ok = False
    if not ok:
        return None
    return tuple(status for status in PUSHED_STATUSES if status in value)


def _faults(r: Reader, raw: dict[str, Any], path: Path) -> tuple[str, ...] | None:
    """``fault:``: one fault for every task, or a list the skill's tasks take in turn."""
    if "fault" not in raw:
        return _DEFAULTS.faults
    where = (*path, "fault")
    value = raw["fault"]
    if isinstance(value, str):
        return (value,) if r.among(value, where, CALLBACK_FAULTS) else None
    if not isinstance(value, list) or not value:
        r.bad(
            where,
            f"a fault ({listed(CALLBACK_FAULTS)}), or a list of them for the tasks in turn",
            describe(value),
        )
        return None
    known = [r.among(fault, (*where, i), CALLBACK_FAULTS) for i, fault in enumerate(value)]
    return tuple(value) if all(known) else None  # (every fault said, not the first alone)


def _late_by(
    r: Reader, raw: dict[str, Any], path: Path, faults: tuple[str, ...] | None
) -> int | None:
    if "late_by" not in raw:
        return _DEFAULTS.late_ms
    if faults is not None and "late" not in faults:
        r.bad(
            (*path, "late_by"),
            "late_by: only with the late fault",
            f"late_by with fault: {', '.join(faults)}",
            "add late to fault:, or remove late_by",
            at_key=True,
        )
        return None
    return _duration(r, raw, "late_by", path, _DEFAULTS.late_ms)
