"""The ``proxy`` of a scenario file: a step, a skill, a route or a whole scenario forwarding to a
real provider → checked :class:`~.model.Proxy` values.

``proxy: URL`` or ``proxy: {url: URL, verify: true|false|CA_FILE, timeout_ms: N, streams:
{resumable: true, idle_bound: 2s, expected: 5s}}`` (what the provider's streams promise,
for the audit).
As a step it composes with ``delay`` (before the upstream call), ``times``,
``one_of``/``failure_rate`` (an outcome that is not the proxy answers instead
of it) and ``after`` (commit then fail: the upstream answers, then ``after``'s
error or fault replaces its answer). On a skill, a route or the scenario it is
a shorthand: one proxy step for each endpoint it stands for.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from .after import read_after
from .durations import read_duration
from .model import TEXT_TYPE, ProviderStreams, Proxy, Reply, Sequence, Step
from .problems import Path, describe
from .reader import Reader
from .waits_and_faults import BAD
from .waits_and_faults import delay as read_delay

PROXY_KEYS = ("url", "verify", "timeout_ms", "streams")
STREAMS_KEYS = ("resumable", "idle_bound", "expected")
PROXY_STEP_KEYS = ("proxy", "after", "delay", "times", "set_state")
DEFAULT_TIMEOUT_MS = 30_000
_URL = "an absolute http:// or https:// URL of the provider, scheme://host[:port]"
_SHAPE = "a provider's URL, or {url: URL, verify: true|false|CA_FILE, timeout_ms: N}"

ReadStep = Callable[[Reader, Any, Path, Any], "Step | None"]


def read_proxy(r: Reader, value: Any, path: Path) -> Proxy | None:
    """``proxy:``'s value checked (None, with problems recorded, when it is wrong)."""
    if isinstance(value, str):
        return _url(r, value, path)
    if not isinstance(value, dict):
        r.bad(path, _SHAPE, describe(value))
        return None
    if not r.keys(value, path, PROXY_KEYS, required=("url",)):
        return None
    url = value["url"]
    if not isinstance(url, str):
        r.bad((*path, "url"), _URL, describe(url))
        return None
    proxy = _url(r, url, (*path, "url"))
    verify: bool | str = True
    if "verify" in value:
        verify = _verify(r, value["verify"], (*path, "verify"))
    timeout = r.integer(
        value,
        "timeout_ms",
        path,
        default=DEFAULT_TIMEOUT_MS,
        minimum=1,
        maximum=r.max_delay_ms,
        unit="ms",
    )
    streams = None
    if "streams" in value:
        streams = _streams(r, value["streams"], (*path, "streams"))
    if proxy is None or verify is BAD or timeout is None or streams is BAD:
        return None
    if verify is not True and proxy.scheme != "https":
        r.bad((*path, "verify"), "verify only beside an https:// url", describe(value["verify"]))
        return None
    return Proxy(
        proxy.url,
        proxy.scheme,
        proxy.host,
        proxy.port,
        verify,
        timeout,
        streams=streams if isinstance(streams, ProviderStreams) else None,
    )


def _streams(r: Reader, value: Any, path: Path) -> ProviderStreams | object:
    """``streams:``: what the provider's streams promise (BAD, with problems, when wrong)."""
    raw = r.mapping(value, path, "{resumable: true, idle_bound: 2s, expected: 5s}")
    if raw is None or not r.keys(raw, path, STREAMS_KEYS):
        return BAD
    resumable = r.boolean(raw.get("resumable", False), (*path, "resumable"))
    bound = expected = None
    if "idle_bound" in raw:
        bound = read_duration(
            r, raw["idle_bound"], (*path, "idle_bound"), minimum=1, maximum=r.max_delay_ms
        )
    if "expected" in raw:
        expected = read_duration(
            r, raw["expected"], (*path, "expected"), minimum=0, maximum=r.max_delay_ms
        )
    if resumable is None or ("idle_bound" in raw and bound is None):
        return BAD
    if "expected" in raw and expected is None:
        return BAD
    return ProviderStreams(resumable, bound, expected)


def _url(r: Reader, text: str, path: Path) -> Proxy | None:
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        r.bad(path, _URL, describe(text), str(exc))
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        r.bad(path, _URL, describe(text))
        return None
    for what, there in (
        ("a path", parts.path not in ("", "/")),
        ("a query", bool(parts.query) or text.endswith("?")),
        ("a fragment", bool(parts.fragment) or "#" in text),
        ("user information", parts.username is not None),
    ):
        if there:
            r.bad(
                path,
                f"{_URL} (no path, query or fragment: the request's own are forwarded)",
                f"{describe(text)}, with {what}",
            )
            return None
    host = parts.hostname
    port = port or (443 if parts.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    return Proxy(f"{parts.scheme}://{shown}:{port}", parts.scheme, host, port)


def _verify(r: Reader, value: Any, path: Path) -> Any:
    expected = "true, false, or the path of a CA certificates file (PEM)"
    if isinstance(value, bool):
        checked = r.boolean(value, path, expected)  # an unquoted yes: write true
        return BAD if checked is None else checked
    if not isinstance(value, str) or not value:
        r.bad(path, expected, describe(value))
        return BAD
    base = os.path.dirname(r.doc.file) if os.path.isfile(r.doc.file) else os.getcwd()
    found = os.path.abspath(os.path.join(base, value))
    if not os.path.isfile(found):
        r.bad(
            path,
            "the path of a CA certificates file (PEM) that exists",
            f"{value!r}, which is not a file ({found})",
            "a relative path is read from the scenario file's folder",
        )
        return BAD
    # Read now, as the upstream's TLS will: a file that holds no certificate would
    # otherwise fail every proxied request, each with a closed connection.
    import ssl  # only for a scenario that names a CA file

    try:
        ssl.create_default_context(cafile=found)
    except (ssl.SSLError, OSError) as exc:
        r.bad(
            path,
            "the path of a CA certificates file (PEM)",
            f"{value!r}, which holds no certificate Python's ssl can read ({found})",
            f"ssl says: {getattr(exc, 'reason', None) or exc}",
        )
        return BAD
    return found


def proxy_step(r: Reader, raw: dict[str, Any], path: Path, ctx: Any, read: ReadStep) -> Step | None:
    """A step with ``proxy`` (and maybe ``after``, ``delay``); *read* reads ``after``'s step."""
    others = [k for k in raw if k not in PROXY_STEP_KEYS]
    if others:
        r.bad(
            (*path, others[0]),
            "only delay, times and after beside proxy",
            f"{others[0]} as well",
            "the provider's answer is relayed; put an error or fault in after: or in"
            " another outcome (one_of, failure_rate)",
            at_key=True,
        )
        return None
    proxy = read_proxy(r, raw["proxy"], (*path, "proxy"))
    delay = read_delay(r, raw, "delay", path)
    after = None
    if "after" in raw:
        after = read_after(r, raw["after"], (*path, "after"), ctx, read)
    if proxy is None or delay is BAD or after is BAD:
        return None
    if isinstance(after, Step):
        proxy = dataclasses.replace(proxy, after=after)
        reply = after.reply
    else:
        reply = Reply.make(502, b"", TEXT_TYPE)  # never sent: the upstream's answer is
    return Step(reply, r.position(path), delay=delay, proxy=proxy)


def shorthand(
    r: Reader, raw: dict[str, Any], path: Path, conflicts: tuple[str, ...] = ()
) -> Sequence | object | None:
    """``proxy: URL`` on a skill, route or scenario: one proxy step (None: no such key; BAD).

    *conflicts*: keys that cannot be beside it (a route's ``steps``)."""
    if "proxy" not in raw:
        return None
    where = (*path, "proxy")
    for key in conflicts:
        if key in raw:
            r.bad(
                where,
                f"proxy or {key}",
                "both",
                "a route forwards, or plays its steps",
                at_key=True,
            )
            return BAD
    proxy = read_proxy(r, raw["proxy"], where)
    if proxy is None:
        return BAD
    return Sequence((Step(Reply.make(502, b"", TEXT_TYPE), r.position(where), proxy=proxy),))
