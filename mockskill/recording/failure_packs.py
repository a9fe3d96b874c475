"""Failure packs: a scenario file with a named case for every way a skill can fail.

This module owns what ``mockskill generate`` writes from Skill Descriptors: for each
skill, its descriptor served as given (its endpoint pointed at the mock) and a named
case (``name:``) per failure the descriptor makes possible — ``AUTH_REQUIRED`` and
``PERMISSION_DENIED`` only where it declares ``auth``, ``VERSION_INCOMPATIBLE`` from its
``protocol_version``, a stream's failures only where it declares a stream, and so on
(:func:`invoke_cases`, :func:`describe_cases`). A consumer test picks one per request
with the ``Mockskill-Case`` header, or plays them in order without it (each case is
``when: {}`` and ends with ``next``). The text is written here, line by line, so that
the same descriptors give the same bytes and every case carries a comment saying what
it is for (docs/generate.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..protocol import catalog, corpus
from ..protocol.versions import parse_version
from ..scenario.model import FAULTS, STREAM_FAULTS

RETRY_ADVICE: Mapping[str, int] = {"suggested_delay_ms": 2000, "max_attempts": 5}
"""The advice of the ``ENDPOINT_UNREACHABLE`` cases (the chapter's own example)."""
STREAM_FAULT_AFTER = 3
"""The events a stream's faulty cases send before their fault."""
CORPUS_FAMILIES = (
    "missing-",
    "wrong-enum-",
    "wrong-type-",
    "malformed-uri-",
    "bad-",
    "nested-",
    "several-",
    "not-an-object-",
)
"""The corpus's families of invalid descriptors (:mod:`mockskill.protocol.corpus`): a pack
serves the first of each, so a consumer's validator meets every kind of mistake once
without a case per corpus entry."""


@dataclass(frozen=True)
class PackCase:
    """One named case of a pack: what it is for (the comment above it) and its step."""

    name: str
    purpose: str
    step: Mapping[str, Any]
    task_life: Mapping[str, Any] | None = None
    """The life of the task its step submits (``task_life:``; None: the skill's)."""


TASK_POLL_AFTER = "100ms"
"""How soon a pack's tasks advise the next poll: a consumer test walks a life in a second."""


def task_life(skill_id: str) -> dict[str, Any]:
    """The skill's own life in a pack (its ``ok``): submitted, working, then completed,
    each phase counted in polls (no clock: a consumer test is never racing it)."""
    return {
        "poll_after": TASK_POLL_AFTER,
        "life": [
            {"status": "submitted", "polls": 1},
            {"status": "working", "polls": 2, "progress": [50]},
            {"status": "completed", "json": {"skill": skill_id, "result": "ok"}},
        ],
    }


def task_cases(descriptor: Mapping[str, Any]) -> list[PackCase]:
    """A task skill's cases beyond ``ok``: the 202 lost, and each other end a life can
    have (failed, cancelled by the provider, waiting for input, gone), each a life of its
    own (``task_life:``) submitted by the case."""
    skill_id = str(descriptor.get("id"))
    submitted = {"status": "submitted", "polls": 1}
    working = {"status": "working", "polls": 1, "progress": [50]}
    done = {"status": "completed", "json": {"skill": skill_id, "result": "ok"}}
    submit = {"task": "submit"}

    def life(*phases: Mapping[str, Any], ttl: str | None = None) -> dict[str, Any]:
        lived: dict[str, Any] = {"poll_after": TASK_POLL_AFTER}
        if ttl is not None:
            lived["ttl"] = ttl
        lived["life"] = list(phases)
        return lived

    failed = {"status": "failed", "error": "EXECUTION_TIMEOUT"}
    waits = {"status": "input_required"}
    return [
        PackCase(
            "task-submit-lost",
            "the task started, but its 202 was lost (reset): a retry must not start it twice",
            {"task": "submit", "after": {"fault": "CONNECTION_RESET_BY_PEER"}},
        ),
        PackCase(
            "task-failed",
            "the task fails mid-way (EXECUTION_TIMEOUT, with retry advice): invoke again",
            submit,
            life(submitted, working, failed),
        ),
        PackCase(
            "task-cancelled",
            "the provider cancels the task mid-way: no result, stop polling",
            submit,
            life(submitted, working, {"status": "cancelled"}),
        ),
        PackCase(
            "task-input-required",
            "the task waits for input: POST a JSON object to its status URL, then poll on",
            submit,
            life(submitted, waits, working, done),
        ),
        PackCase(
            "task-gone",
            "the task ends at once and its status URL expires: 404 TASK_EXPIRED, invoke again",
            submit,
            life(submitted, done, ttl="1ms"),
        ),
    ]


def declared_auth(descriptor: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The descriptor's ``auth`` when it asks for credentials (a type other than none)."""
    auth = descriptor.get("auth")
    if isinstance(auth, Mapping) and auth.get("type") not in (None, "none"):
        return auth
    return None


def declared_stream(descriptor: Mapping[str, Any]) -> list[str] | None:
    """The stream formats the descriptor declares (``endpoint.streaming``: true, a format
    or a list of them: ``sse``, ``ndjson``); None when it declares none."""
    endpoint = descriptor.get("endpoint")
    streaming = endpoint.get("streaming") if isinstance(endpoint, Mapping) else None
    if streaming is True:
        return ["sse"]
    formats = [streaming] if isinstance(streaming, str) else streaming
    if isinstance(formats, list):
        known = [f for f in formats if f in ("sse", "ndjson")]
        return list(dict.fromkeys(known)) or None
    return None


def declared_rate_limit(descriptor: Mapping[str, Any]) -> bool:
    """Whether the descriptor declares a rate limit (a ``rate_limit`` member, any value but
    null or false: the chapter defines none, so its content is not read)."""
    value = descriptor.get("rate_limit")
    return value is not None and value is not False  # (not `in`: 0 == False in Python)


def is_task(descriptor: Mapping[str, Any]) -> bool:
    """Whether the skill runs as a long-running task (``capability_type: task``)."""
    return descriptor.get("capability_type") == "task"


def invoke_cases(descriptor: Mapping[str, Any]) -> list[PackCase]:
    """The named cases of the skill's invoke endpoint, in the order a sequence plays them."""
    skill_id = str(descriptor.get("id"))
    formats = declared_stream(descriptor)
    ok: dict[str, Any] = {"json": {"skill": skill_id, "result": "ok"}}
    said = "the skill answers"
    if is_task(descriptor):
        ok, said = {"task": "submit"}, "the task is accepted (202), then completes"
    elif formats is not None:
        ok, said = {"stream": _stream(formats)}, "the stream runs whole, then its result"
    cases = [PackCase("ok", f"success: {said}", ok)]
    auth = declared_auth(descriptor)
    if auth is not None:
        scopes = auth.get("scopes") if isinstance(auth.get("scopes"), list) else []
        details: dict[str, Any] = {"required_auth_type": auth.get("type")}
        if isinstance(auth.get("authorization_url"), str):
            details["authorization_url"] = auth["authorization_url"]
        details["scopes"] = scopes
        cases.append(
            PackCase(
                "AUTH_REQUIRED",
                "no or bad credentials: 401, not to be retried until credentials are supplied",
                {"error": "AUTH_REQUIRED", "details": details},
            )
        )
        cases.append(
            PackCase(
                "PERMISSION_DENIED",
                "credentials without the declared scopes: 403, not to be retried",
                {
                    "error": "PERMISSION_DENIED",
                    "details": {"skill_id": skill_id, "missing_scopes": scopes},
                },
            )
        )
    cases += [
        PackCase(
            "EXECUTION_TIMEOUT-408",
            "the skill ran past its timeout (408): retry with backoff, as advised",
            {"error": "EXECUTION_TIMEOUT", "status": 408},
        ),
        PackCase(
            "EXECUTION_TIMEOUT-504",
            "a gateway gave up on the skill (504): retry with backoff, as advised",
            {"error": "EXECUTION_TIMEOUT", "status": 504},
        ),
        PackCase(
            "ENDPOINT_UNREACHABLE-502",
            "the endpoint could not be reached (502): retry after Retry-After",
            {"error": "ENDPOINT_UNREACHABLE", "status": 502, "retry": dict(RETRY_ADVICE)},
        ),
        PackCase(
            "ENDPOINT_UNREACHABLE-503",
            "the endpoint is unavailable (503): retry after Retry-After",
            {"error": "ENDPOINT_UNREACHABLE", "status": 503, "retry": dict(RETRY_ADVICE)},
        ),
        _version_case(descriptor),
    ]
    if declared_rate_limit(descriptor):
        cases += [
            PackCase(
                "RATE_LIMITED-429",
                "over the declared rate limit (429, outside the chapter): wait Retry-After",
                {"rate_limited": {"retry_after_ms": 1000}},
            ),
            PackCase(
                "RATE_LIMITED-503",
                "over the rate limit, the in-protocol way (503 ENDPOINT_UNREACHABLE)",
                {"rate_limited": {"retry_after_ms": 1000, "status": 503}},
            ),
        ]
    if is_task(descriptor):
        cases += task_cases(descriptor)
    if formats is not None:
        cases += [
            PackCase(
                f"stream-{kind}",
                f"the stream breaks after event {STREAM_FAULT_AFTER}: {kind}",
                {"stream": _stream(formats, fault=kind)},
            )
            for kind in STREAM_FAULTS
        ]
        cases.append(
            PackCase(
                "stream-error-event",
                "an error event after the 200 (ENDPOINT_UNREACHABLE, with retry advice)",
                {"stream": _stream(formats, error=True)},
            )
        )
    cases += [
        PackCase(
            f"fault-{fault}",
            f"a transport fault instead of an answer: {fault}",
            {"fault": fault},
        )
        for fault in FAULTS
    ]
    return cases


def _version_case(descriptor: Mapping[str, Any]) -> PackCase:
    """``VERSION_INCOMPATIBLE`` for a consumer of another major version than the
    descriptor's ``protocol_version`` (the chapter's example: 2.0.0 against 1.x.x)."""
    version = descriptor.get("protocol_version")
    parsed = parse_version(version) if isinstance(version, str) else None
    major = parsed[0] if parsed is not None else 1
    other = major - 1 if major > 0 else major + 1
    return PackCase(
        "VERSION_INCOMPATIBLE",
        f"a consumer of protocol {other}.x.x meets this {version} skill: 422, upgrade",
        {
            "error": "VERSION_INCOMPATIBLE",
            "details": {"descriptor_version": version, "consumer_supported_range": f"{other}.x.x"},
        },
    )


def _stream(formats: list[str], *, fault: str | None = None, error: bool = False) -> Any:
    stream: dict[str, Any] = {"format": formats if len(formats) > 1 else formats[0]}
    stream["events"] = [
        {"repeat": 5, "delay": "20ms", "event": "token", "data": {"text": "tok"}, "id_from": 1}
    ]
    if error:
        stream["end"] = {"error": "ENDPOINT_UNREACHABLE", "retry": dict(RETRY_ADVICE)}
    else:
        stream["end"] = {"event": "result", "data": {"result": "ok"}}
    if fault is not None:
        stream["fault"] = {"after": STREAM_FAULT_AFTER, "kind": fault}
        if fault == "stall":
            stream["fault"]["for"] = "5s"
    return stream


def describe_cases(descriptor: Mapping[str, Any]) -> list[PackCase]:
    """The named cases of the skill's descriptor URL: not found, then one invalid
    descriptor of each corpus family (the consumer's own ``VALIDATION_ERROR``)."""
    cases = [
        PackCase(
            "SKILL_NOT_FOUND",
            "the descriptor URL names no skill: 404, not to be retried",
            {"error": "SKILL_NOT_FOUND"},
        )
    ]
    for family in CORPUS_FAMILIES:
        found = next((c for c in corpus.build() if c.name.startswith(family) and not c.valid), None)
        if found is not None:
            cases.append(
                PackCase(
                    f"invalid-descriptor-{found.name}",
                    f"an invalid descriptor, for the consumer's own VALIDATION_ERROR:"
                    f" {found.description}",
                    {"json": found.descriptor},
                )
            )
    return cases


def served_descriptor(descriptor: Mapping[str, Any]) -> dict[str, Any]:
    """*descriptor* as the pack serves it: its endpoint pointed at the mock's invoke URL
    (else a consumer would invoke the real provider), and at the method the mock invokes
    with, ``POST``, where it declares another (else a consumer that follows it misses)."""
    served = json.loads(json.dumps(descriptor))  # a deep copy of plain JSON
    endpoint = served.get("endpoint")
    if isinstance(endpoint, dict):
        endpoint["url"] = f"{catalog.BASE_URL}/skills/{served.get('id')}/invoke"
        if "method" in endpoint:
            endpoint["method"] = "POST"
    return served  # type: ignore[no-any-return]


def _repointed(descriptor: Mapping[str, Any]) -> str:
    """What the pack changed in the descriptor, as its comment says it."""
    endpoint = descriptor.get("endpoint")
    method = endpoint.get("method", "POST") if isinstance(endpoint, Mapping) else "POST"
    if method == "POST":
        return "its endpoint pointed at this server"
    return f"its endpoint pointed at this server, its method {method} made POST (the mock's)"


def scenario_name(descriptors: Sequence[Mapping[str, Any]]) -> str:
    """The pack's scenario name: the one skill's id, or ``failure-pack`` for several."""
    if len(descriptors) != 1:
        return "failure-pack"
    # (an id no URL can carry is the one problem the pack's loading reports, not its name too)
    name = re.sub(r"[^A-Za-z0-9._~-]+", "-", str(descriptors[0].get("id"))).lstrip("._~-")
    return f"{name}-failures" if name else "failure-pack"


def generate(descriptors: Sequence[Mapping[str, Any]], source: str) -> str:
    """The pack's text for *descriptors* (valid ones: the caller checks), read from
    *source* (named in its first comment). Stable: the same input, the same bytes."""
    lines = [
        f"# A failure pack for {_skills(descriptors)}, written by `mockskill generate {source}`.",
        "# Regenerate it rather than edit it: the same descriptor gives the same file.",
        "#",
        "# Each named case is one way the skill can fail that its descriptor makes possible.",
        "# A test picks one per request with the header `Mockskill-Case: NAME`; without",
        "# the header each endpoint plays its cases in order, one request each (the",
        "# descriptor's: SKILL_NOT_FOUND, the invalid descriptors, then the descriptor;",
        "# the invocation's: ok, the failures, then ok for good). docs/generate.md",
        f"name: {scenario_name(descriptors)}",
        "skills:",
    ]
    for descriptor in descriptors:
        lines += _skill_lines(descriptor)
    return "\n".join(lines) + "\n"


def _skills(descriptors: Sequence[Mapping[str, Any]]) -> str:
    ids = ", ".join(repr(str(d.get("id"))) for d in descriptors)
    return f"skill {ids}" if len(descriptors) == 1 else f"skills {ids}"


def _skill_lines(descriptor: Mapping[str, Any]) -> list[str]:
    skill_id = str(descriptor.get("id"))
    lines = [f"  - id: {_scalar(skill_id)}"]
    lines.append(f"    # served as the descriptor says, {_repointed(descriptor)}")
    lines.append("    raw_descriptor:")
    lines += _block(served_descriptor(descriptor), 6)
    if is_task(descriptor):
        lines.append("    # capability_type task: submitted, working, then completed")
        lines += _life_lines("task", task_life(skill_id), 4)
    lines.append("    describe:")
    lines += _cases_lines(describe_cases(descriptor), {"descriptor": True}, "the descriptor")
    lines.append("    invoke:")
    ok = invoke_cases(descriptor)[0]
    lines += _cases_lines(invoke_cases(descriptor), ok.step, "ok")
    return lines


def _cases_lines(cases: Iterable[PackCase], default: Mapping[str, Any], said: str) -> list[str]:
    lines = ["      cases:"]
    for case in cases:
        lines += [
            f"        # {case.purpose}",
            f"        - name: {_scalar(case.name)}",
            "          when: {}",
            "          end: next",
        ]
        if case.task_life is not None:
            lines += _life_lines("task_life", case.task_life, 10)
        lines += ["          steps:", f"            - {_flow(case.step)}"]
    lines += [f"      # once every case has played (without the header): {said}", "      steps:"]
    lines.append(f"        - {_flow(default)}")
    return lines


def _life_lines(key: str, life: Mapping[str, Any], indent: int) -> list[str]:
    """A task's life under *key*: its settings, then a phase a line."""
    pad = " " * indent
    lines = [f"{pad}{key}:"]
    for name, value in life.items():
        if name != "life":
            lines.append(f"{pad}  {name}: {_flow(value)}")
    lines.append(f"{pad}  life:")
    lines += [f"{pad}    - {_flow(phase)}" for phase in life["life"]]
    return lines


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*|[0-9]+(?:ms|s|m)")
"""A string YAML reads back as that string unquoted: a word, or a duration (``100ms``)."""
_YAML_WORDS = frozenset(
    {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
)  # words YAML 1.1 reads as something else: always quoted


# Characters JSON leaves as they are that YAML does not read back so: not printable in
# YAML (DEL, C1 controls, U+FFFE/F, a lone surrogate: the file would not load) or a
# line break inside a quoted string (NEL, LS, PS: folded or kept as a break).
_NOT_YAML = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _quoted(text: str) -> str:
    """*text* as a double-quoted YAML string: JSON's spelling, which YAML reads, with what
    YAML would not read back as written escaped too (``\\uXXXX``, as JSON spells it)."""
    return _NOT_YAML.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


def _key(key: str) -> str:
    if _PLAIN_KEY.fullmatch(key) and key.lower() not in _YAML_WORDS:
        return key
    return _quoted(key)


def _scalar(value: Any) -> str:
    """A scalar in YAML: JSON's spelling (a double-quoted YAML string reads JSON's escapes)."""
    if isinstance(value, float):
        # YAML 1.1 (the loader's) reads an exponent as a number only after a point: JSON's
        # 1e-05 would come back a string, 1.0e-05 comes back the number
        spelled = json.dumps(value)
        mantissa, exponent, power = spelled.partition("e")
        return f"{mantissa}.0e{power}" if exponent and "." not in mantissa else spelled
    if not isinstance(value, str):
        return json.dumps(value)
    if _PLAIN_VALUE.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return _quoted(value)


def _flow(value: Any) -> str:
    """*value* in YAML's flow style, on one line."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(str(k))}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _scalar(value)


def _block(value: Mapping[str, Any], indent: int) -> list[str]:
    """A mapping in YAML's block style (nested mappings too; other values in flow)."""
    pad = " " * indent
    lines = []
    for key, item in value.items():
        if isinstance(item, Mapping) and item:
            lines.append(f"{pad}{_key(str(key))}:")
            lines += _block(item, indent + 2)
        else:
            lines.append(f"{pad}{_key(str(key))}: {_flow(item)}")
    return lines
