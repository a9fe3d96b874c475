"""What the error chapter asks of a retry, and the tolerance the audit grants.

:class:`Policy` holds the parameters the rules use (docs/audit.md); the rest
says what must change before a non-retryable failure may be retried, the
wait an answer advised, and the attempts its advice allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.catalog import CATEGORIES, OUTSIDE_CHAPTER
from .retries import VALIDATION_ERROR, AttemptOutcome

# What must change before a non-retryable error can be retried; the other
# categories (SKILL_NOT_FOUND, an invalid descriptor) accept any change at
# all, so that the audit never flags a retry that might have been meant.
MUST_CHANGE = {
    "AUTH_REQUIRED": ("credential",),
    "PERMISSION_DENIED": ("credential",),
    "VERSION_INCOMPATIBLE": ("protocol_version",),
}


FINGERPRINT = ("credential", "protocol_version", "body_digest")


FIELD_NAMES = {
    "credential": "credential",
    "protocol_version": "Skill-Protocol-Version",
    "body_digest": "body",
}


@dataclass(frozen=True)
class Policy:
    """The parameters the rules use (docs/audit.md).

    A wait passes when it is at least the required wait less the tolerance:
    the smaller of *tolerance_ms* and *tolerance_ratio* times the required
    wait. Both bound the noise of timers and clocks; neither lets a consumer
    subtract jitter from what the protocol asks (add it instead).
    """

    initial_delay_ms: float = 1000.0
    """The chapter's initial delay, for a failure whose answer gave no advice."""
    tolerance_ms: float = 50.0
    tolerance_ratio: float = 0.1
    herd_chains: int = 3
    """``retry-herd``: how many chains retrying in lockstep make a herd (K)."""
    herd_window_ms: float = 20.0
    herd_window_ratio: float = 0.02
    """``retry-herd``: retries whose waits past the advice differ by less than the larger
    of *herd_window_ms* (timer noise) and *herd_window_ratio* times the advice are in
    lockstep; ordinary jitter (10 % of the advice or more) spreads them wider."""
    herd_share: float = 2 / 3
    """``retry-herd``: the share of the chains waiting together that must be in lockstep
    (a few jittered chains always land close together by chance; most of them do not)."""
    burst_ms: float = 100.0
    """``rate-limit-ignored``: requests sent within this of each other went out together
    (a burst, before any answer could be read): the ones sent with the answer that said
    no tokens remain are not judged against it."""
    abandoned_ms: float = 5000.0
    """``task-abandoned``: how long past its next poll's due time (the last answer's
    ``Retry-After``, from when the consumer had it) a live task may go unpolled, by the
    report's time, before the consumer is judged to have left it (a consumer may poll
    later than advised; this is how much later). ``callback-without-reconcile``: how long
    after a task with a lost callback ended its status URL may still be asked."""

    idle_slack_ms: float = 250.0
    """``stall-not-detected``: how long past a stream's idle bound a consumer may still hold
    it (its idle timer's granularity, and the moment the server takes to see it leave)."""

    def least(self, required_ms: float) -> float:
        """The shortest wait that still counts as *required_ms*."""
        return required_ms - min(self.tolerance_ms, self.tolerance_ratio * required_ms)

    def tolerance_text(self) -> str:
        """The tolerance as a finding's expectation states it."""
        return (
            f"tolerance: {self.tolerance_ratio:.0%} of the wait, at most {self.tolerance_ms:.0f} ms"
        )

    def herd_window(self, advised_ms: float) -> float:
        """``retry-herd``'s window for retries after an advice of *advised_ms*."""
        return max(self.herd_window_ms, self.herd_window_ratio * advised_ms)

    def as_json(self) -> dict[str, float]:
        return {
            "initial_delay_ms": self.initial_delay_ms,
            "tolerance_ms": self.tolerance_ms,
            "tolerance_ratio": self.tolerance_ratio,
            "herd_chains": self.herd_chains,
            "herd_window_ms": self.herd_window_ms,
            "herd_window_ratio": self.herd_window_ratio,
            "herd_share": self.herd_share,
            "burst_ms": self.burst_ms,
            "abandoned_ms": self.abandoned_ms,
            "idle_slack_ms": self.idle_slack_ms,
        }


def advised_ms(o: AttemptOutcome, policy: Policy) -> float:
    return o.advice.suggested_delay_ms if o.advice is not None else policy.initial_delay_ms


def max_attempts(o: AttemptOutcome) -> int | None:
    if o.advice is not None:
        return o.advice.max_attempts
    category = CATEGORIES.get(o.code or "") or OUTSIDE_CHAPTER.get(o.code or "")
    default = category.retry if category is not None else None
    return default.max_attempts if default is not None else None


_NEEDED = {
    "AUTH_REQUIRED": "retry only with new credentials (details.authorization_url, details.scopes)",
    "PERMISSION_DENIED": "retry only with credentials that grant the missing scopes",
    "VERSION_INCOMPATIBLE": "retry only with another Skill-Protocol-Version",
    "SKILL_NOT_FOUND": "do not ask again for what does not exist",
    VALIDATION_ERROR: "do not fetch the same descriptor again: it must be fixed",
}


def needed(code: str) -> str:
    return f"{code} is not retryable: {_NEEDED.get(code, 'do not retry it unchanged')}"
