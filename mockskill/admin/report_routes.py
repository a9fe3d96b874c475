"""``GET /__admin/report``: the retry audit of the journal, for the request being served.

The audit itself (chains, rules, coverage) is :mod:`mockskill.audit`, pure
over the journal; this module reads the report's query parameters (the
sessions, the skill and the policy; a bad one is a :class:`BadFilter`, a
400 like every admin listing's) and answers with the report. The blueprint
imports it on first use: serving skills never pays for the audit's imports.
"""

from __future__ import annotations

import difflib
import math
from typing import TYPE_CHECKING, Any

from flask import request

from .. import audit
from .journal_query import BadFilter

if TYPE_CHECKING:
    from ..engine.engine import Engine

POLICY_PARAMETERS = (
    "initial_delay_ms",
    "tolerance_ms",
    "tolerance_ratio",
    "herd_chains",
    "herd_window_ms",
    "herd_window_ratio",
    "herd_share",
    "burst_ms",
    "abandoned_ms",
    "idle_slack_ms",
)
"""The audit's tolerances (:class:`~mockskill.audit.Policy`), taken by the report and the
verdict alike."""
PARAMETERS = ("session", "skill", *POLICY_PARAMETERS)


def answer(engine: Engine) -> tuple[dict[str, Any], int]:
    """``GET /__admin/report`` for the request being served: the report, or a 400."""
    try:
        policy, sessions, skill = _query(request.args)
    except BadFilter as exc:
        return exc.body(), 400
    entries = engine.state.journal()
    if skill is not None:
        entries = [e for e in entries if e.skill == skill]
    named = audit.named_cases(engine.scenarios.skills)
    return audit.report(entries, policy, sessions=sessions, named=named), 200


def _query(args: Any) -> tuple[audit.Policy, list[str] | None, str | None]:
    check_names(args, PARAMETERS, "the report")
    sessions = args.getlist("session") or None
    skill = args.get("skill")
    return policy(args), sessions, skill


def check_names(args: Any, taken: tuple[str, ...], what: str) -> None:
    """A :class:`BadFilter` naming the parameters *what* takes for the first of *args* that
    is not one of *taken*."""
    for name in args:
        if name not in taken:
            hint = difflib.get_close_matches(name, taken, n=1)
            message = f"{name!r} is not a parameter of {what}; it takes {', '.join(taken)}"
            if hint:
                message += f" (did you mean {hint[0]!r}?)"
            raise BadFilter(name, message, list(taken))


def policy(args: Any) -> audit.Policy:
    """The audit's tolerances the query sets (:data:`POLICY_PARAMETERS`), the others default."""
    default = audit.Policy()
    return audit.Policy(
        initial_delay_ms=_number(args, "initial_delay_ms", default.initial_delay_ms),
        tolerance_ms=_number(args, "tolerance_ms", default.tolerance_ms),
        tolerance_ratio=_number(args, "tolerance_ratio", default.tolerance_ratio, below=1.0),
        herd_chains=_chains(args, default.herd_chains),
        herd_window_ms=_number(args, "herd_window_ms", default.herd_window_ms),
        herd_window_ratio=_number(args, "herd_window_ratio", default.herd_window_ratio, below=1.0),
        herd_share=_share(args, default.herd_share),
        burst_ms=_number(args, "burst_ms", default.burst_ms),
        abandoned_ms=_number(args, "abandoned_ms", default.abandoned_ms),
        idle_slack_ms=_number(args, "idle_slack_ms", default.idle_slack_ms),
    )


def _number(args: Any, name: str, default: float, below: float | None = None) -> float:
    text = args.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (below is not None and value >= below):
        bound = f"below {below}" if below is not None else "finite"
        raise BadFilter(name, f"{name}={text!r} is not a number of at least 0 ({bound})", "number")
    return value


def _chains(args: Any, default: int) -> int:
    text = args.get("herd_chains")
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()) or int(text) < 2:
        raise BadFilter(
            "herd_chains", f"herd_chains={text!r} is not a whole number of at least 2", "integer"
        )
    return int(text)


def _share(args: Any, default: float) -> float:
    share = _number(args, "herd_share", default)
    if not 0 < share <= 1:
        raise BadFilter(
            "herd_share",
            f"herd_share={args.get('herd_share')!r} is not above 0 and at most 1",
            "number",
        )
    return share
