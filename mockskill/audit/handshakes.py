"""TLS handshakes that failed on a skill's fault port: coverage, and the one rule they meet.

A handshake fails before any HTTP request, so these journal entries
(``Entry.tls``: the fault, the client's alert, the SNI name) are no attempt
of a retry chain: :func:`http_entries` leaves them out of the chains and the
timeouts. They count in coverage (:func:`tls_coverage`, which TLS faults the
consumer met), and a consumer that meets a certificate that cannot become
valid again and again gets a ``non-retryable-retried`` finding
(:func:`permanent_retried`): retrying an expired or untrusted certificate is
pointless, a reset or hung handshake may be worth a retry (docs/tls.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..engine.state import Entry
from ..scenario.kinds import TLS_FAULT_NAMES, TLS_FAULTS
from .findings import Finding, plural

TRANSIENT = frozenset(f.name for f in TLS_FAULTS if f.transient)
"""The TLS faults that may pass on a retry (a middlebox, a server restarting)."""
PERMANENT = frozenset(TLS_FAULT_NAMES) - TRANSIENT
"""The TLS faults no retry mends: the certificate, the CA, the protocol must change."""


def http_entries(entries: Iterable[Entry]) -> list[Entry]:
    """*entries* but the failed handshakes (which carry no request)."""
    return [e for e in entries if e.tls is None]


def tls_coverage(entries: Iterable[Entry]) -> dict[str, int]:
    """How often each TLS fault failed a handshake of the consumer's."""
    met = dict.fromkeys(TLS_FAULT_NAMES, 0)
    for entry in entries:
        if entry.tls is not None and entry.tls[0] in met:
            met[entry.tls[0]] += 1
    return met


def permanent_retried(session: str, entries: Sequence[Entry]) -> list[Finding]:
    """A skill whose permanent TLS fault the consumer met more than once: it retried it."""
    by_skill: dict[tuple[str | None, str], list[Entry]] = {}
    # Only the failed handshakes are ordered: a session's requests are seldom any.
    failed = [e for e in entries if e.tls is not None and e.tls[0] in PERMANENT]
    for entry in sorted(failed, key=lambda e: (e.started, e.id)):
        fault = entry.tls[0] if entry.tls is not None else ""
        by_skill.setdefault((entry.skill, fault), []).append(entry)
    findings = []
    for (skill, fault), failed in by_skill.items():
        if len(failed) < 2:
            continue
        n = len(failed) - 1
        alerts = sorted({e.tls[1] for e in failed if e.tls is not None and e.tls[1]})
        found = f"{n} {plural(n, 'retry', 'retries')} after the first failed handshake"
        if alerts:
            found += f" (the client's alert: {', '.join(alerts)})"
        findings.append(
            Finding(
                rule="non-retryable-retried",
                session=session,
                endpoint=f"TLS handshake {failed[0].path}",
                attempts=[e.id for e in failed],
                message=f"skill {skill!r}: a TLS handshake that cannot succeed ({fault}) retried",
                expected="a certificate that is expired, for another host, from an unknown CA,"
                " self-signed or weak, a client certificate required, or a protocol version"
                " refused does not mend on a retry: stop, and report it",
                found=found,
                fix="treat certificate and protocol failures (requests.exceptions.SSLError,"
                " httpx.ConnectError with CERTIFICATE_VERIFY_FAILED, curl exit 60/35/56) as"
                " permanent; retry only resets and timeouts of the handshake",
            )
        )
    return findings
