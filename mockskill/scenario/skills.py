"""One skill of a scenario: its id, descriptor, endpoints, timeout, versions and TLS fault.

:func:`read_skill` checks a ``skills:`` item and builds its frozen
:class:`~.model.Skill`: the descriptor served (the default merged with
``descriptor:``, or ``raw_descriptor:`` as is), the ``describe`` and
``invoke`` endpoints with their cases (:mod:`.cases`), ``requires:``
(:mod:`.credentials`), ``tls:``. It is apart from :mod:`.loader`, which puts
scenarios and their sets together, because a skill is the largest part of a
scenario and reads nothing of the others. The name rule scenario names and
skill ids share (they go into URLs) is here too; :mod:`.loader` names it.
"""

from __future__ import annotations

import re
from typing import Any

from ..protocol import catalog
from ..protocol import descriptor as descriptors
from ..protocol.catalog import Context
from ..protocol.versions import Range, parse_version
from . import proxy_config, rate_limits, tasks
from .cases import named_twice, read_endpoint
from .credentials import read_requirement
from .model import JSON_TYPE, TLS_FAULTS, Reply, Requirement, Sequence, Skill, Step
from .problems import Path, describe
from .reader import Reader
from .source import Position
from .steps import StepContext
from .template_syntax import Scope

IN_SKILL = Scope(skill=True)
"""What a skill's steps' placeholders may read (no path variables: a skill's paths have none)."""

SKILL_KEYS = (
    "id",
    "descriptor",
    "raw_descriptor",
    "unreachable",
    "tls",
    "timeout_ms",
    "timeout_status",
    "idempotency_key",
    "rate_limit",
    "task",
    "accepts",
    "upgrade_url",
    "requires",
    "describe",
    "invoke",
    "proxy",
)
SCENARIO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]*$")
NAME_TEXT = "a name of letters, digits and . _ ~ - (it goes into URLs)"


def read_skill(
    r: Reader,
    value: Any,
    path: Path,
    scenario: str,
    claims: list[tuple[int, str, Position]],
) -> Skill | None:
    """One skill; its id goes into *claims* when the id itself is right."""
    raw = r.mapping(value, path, "a skill (a mapping with id, descriptor, invoke ...)")
    if raw is None:
        return None
    before = len(r.problems)
    r.keys(raw, path, SKILL_KEYS, required=("id",))
    skill_id = r.string(raw, "id", path)
    if skill_id is not None and not SCENARIO_NAME.fullmatch(skill_id):
        r.bad((*path, "id"), NAME_TEXT, describe(skill_id))
    elif skill_id is not None:
        claims.append((int(path[-1]), skill_id, r.position(path)))
    checked_id = skill_id or "skill"  # a stand-in, so that the rest is checked too
    requires = read_requirement(r, raw.get("requires"), (*path, "requires"))
    unreachable = r.boolean(raw.get("unreachable", False), (*path, "unreachable")) or False
    tls = _tls_fault(r, raw, path, unreachable)
    runs_task = raw.get("task") is not None  # its invoke starts a task (read below)
    document, served = _descriptor(
        r, raw, path, checked_id, unreachable, requires, tls, task=runs_task
    )
    body = served if served is not None else b"{}"
    describe_ctx = StepContext(
        Context.for_skill(checked_id, "describe", unreachable=unreachable, tls=tls is not None),
        body,
        IN_SKILL,
    )
    invoke_ctx = StepContext(
        Context.for_skill(checked_id, "invoke", unreachable=unreachable, tls=tls is not None),
        body,
        IN_SKILL,
        tasks=("submit",) if runs_task else (),
    )
    where = r.position(path)
    default_describe = Sequence((Step(Reply.make(200, body, "application/json"), where),))
    if unreachable:  # asked here anyway, answer as a gateway that could not connect would
        ok_reply = Reply.error(catalog.render("ENDPOINT_UNREACHABLE", invoke_ctx.error_context))
    else:
        ok_reply = Reply.json(200, {"skill": checked_id, "result": "ok"})
    default_invoke = Sequence((Step(ok_reply, where),))
    if runs_task:  # its invoke starts the task: 202 and the status URL
        default_invoke = Sequence((Step(Reply.make(202, b"", JSON_TYPE), where, task="submit"),))
    proxied = proxy_config.shorthand(r, raw, path)  # proxy: URL: both endpoints forward to it
    if isinstance(proxied, Sequence):
        default_describe = default_invoke = proxied
    describe_read = read_endpoint(
        r,
        raw.get("describe", Reader.MISSING),
        (*path, "describe"),
        describe_ctx,
        default_describe,
        methods=("GET", "HEAD"),
    )
    invoke_read = read_endpoint(
        r,
        raw.get("invoke", Reader.MISSING),
        (*path, "invoke"),
        invoke_ctx,
        default_invoke,
        methods=("POST",),
    )
    timeout_ms = None
    if raw.get("timeout_ms") is not None:
        timeout_ms = r.integer(
            raw, "timeout_ms", path, default=0, minimum=1, maximum=r.max_delay_ms, unit="ms"
        )
    timeout_status = r.integer(raw, "timeout_status", path, default=504)
    if timeout_status is not None and catalog.status_problem("EXECUTION_TIMEOUT", timeout_status):
        r.bad((*path, "timeout_status"), "408 or 504", describe(timeout_status))
    accepts = None
    if raw.get("accepts") is not None:
        text = r.string(raw, "accepts", path)
        accepts = Range.parse(text) if text is not None else None
        if text is not None and accepts is None:
            r.bad(
                (*path, "accepts"),
                "a range of consumer versions: 1.x, 1.2.x, >=1.2.0 <3.0.0, 1.x || 2.x",
                describe(text),
            )
    upgrade_url = r.string(raw, "upgrade_url", path, default=catalog.UPGRADE_URL)
    honours = r.boolean(raw.get("idempotency_key", False), (*path, "idempotency_key"))
    rate_limit = rate_limits.read_rate_limit(r, raw, path)
    task = tasks.read_task(r, raw.get("task"), (*path, "task"), invoke_ctx)
    if task is not None and invoke_read is not None:
        sequences = [invoke_read[0], *(case.sequence for case in invoke_read[1])]
        if not tasks.starts_task(s for s in sequences if s is not None):
            written = "invoke" in raw  # else proxy: forwards it
            r.bad(
                (*path, "invoke" if written else "proxy"),
                "a step with task: submit in the invoke of a task skill",
                "none: no invocation would start the task",
                "add {task: submit} (an invoke left out is that one step)"
                if written
                else "proxy: forwards the invoke too; write invoke: {task: submit}",
                at_key=True,
            )
    if task is not None and invoke_read is not None and isinstance(raw.get("invoke"), dict):
        raw_cases, cases_path = raw["invoke"].get("cases"), (*path, "invoke", "cases")
        lived = tasks.read_case_lives(r, raw_cases, cases_path, invoke_read[1], invoke_ctx, task)
        invoke_read = (invoke_read[0], lived)
    if describe_read is not None and invoke_read is not None:
        named_twice(
            r, [((*path, "describe"), describe_read[1]), ((*path, "invoke"), invoke_read[1])]
        )
    if describe_read is None or invoke_read is None or len(r.problems) > before:
        return None
    (describe_seq, describe_cases), (invoke_seq, invoke_cases) = describe_read, invoke_read
    assert skill_id is not None  # a missing or wrong id is a problem
    name = document.get("name") if isinstance(document, dict) else None
    version = document.get("protocol_version") if isinstance(document, dict) else None
    return Skill(
        id=skill_id,
        name=name if isinstance(name, str) else skill_id,
        scenario=scenario,
        descriptor=body,
        raw="raw_descriptor" in raw,
        describe=describe_seq,
        invoke=invoke_seq,
        where=where,
        timeout_ms=timeout_ms,
        timeout_status=timeout_status or 504,
        unreachable=unreachable,
        protocol_version=version if isinstance(version, str) and parse_version(version) else None,
        accepts=accepts,
        upgrade_url=upgrade_url or catalog.UPGRADE_URL,
        requires=requires,
        describe_cases=describe_cases,
        invoke_cases=invoke_cases,
        idempotency_key=bool(honours),
        tls=tls,
        rate_limit=rate_limit,
        task=task,
    )


def _tls_fault(r: Reader, raw: dict[str, Any], path: Path, unreachable: bool) -> str | None:
    """The skill's ``tls:`` fault (None: none), checked against :data:`TLS_FAULTS`."""
    value = raw.get("tls")
    if value is None:
        return None
    if not isinstance(value, str) or value not in TLS_FAULTS:
        import difflib  # a misspelt fault's suggestion only: not at start-up

        close = difflib.get_close_matches(str(value), TLS_FAULTS, n=1)
        r.bad(
            (*path, "tls"),
            f"a TLS fault: {', '.join(TLS_FAULTS)}",
            describe(value),
            f"did you mean {close[0]}?" if close else "",
        )
        return None
    if unreachable:
        r.bad(
            (*path, "tls"),
            "tls or unreachable",
            "both",
            "an unreachable skill's port refuses connections: no handshake happens there",
            at_key=True,
        )
        return None
    return value


def _descriptor(
    r: Reader,
    raw: dict[str, Any],
    path: Path,
    skill_id: str,
    unreachable: bool,
    requires: Requirement | None,
    tls: str | None = None,
    *,
    task: bool = False,
) -> tuple[Any, bytes | None]:
    """The descriptor (any JSON value, even null) and its JSON; None for JSON after a problem.

    A *task* skill's default says ``capability_type: task`` (what ``descriptor:`` writes
    still wins; a raw descriptor is served as written)."""
    if "raw_descriptor" in raw:
        if "descriptor" in raw:
            r.bad(
                (*path, "raw_descriptor"),
                "descriptor (merged over the default) or raw_descriptor (served as is)",
                "both",
                "keep one",
                at_key=True,
            )
            return None, None
        document = raw["raw_descriptor"]
        return document, r.json_bytes(document, (*path, "raw_descriptor"))
    override = raw.get("descriptor", {})
    if not isinstance(override, dict):
        r.bad(
            (*path, "descriptor"),
            "a mapping merged over the default descriptor (null removes a field)",
            describe(override),
            "to serve something that is not a mapping, use raw_descriptor",
        )
        return None, None
    base = descriptors.default(skill_id, unreachable=unreachable, tls=tls is not None)
    if task:
        base["capability_type"] = "task"
    if requires is not None:
        base["auth"] = descriptors.auth_section(requires.type, requires.scopes)
    merged = descriptors.merge(base, override)
    return merged, r.json_bytes(merged, (*path, "descriptor"))
