"""The table ``mockskill report`` prints: each attempt's answer as the consumer had it."""

from __future__ import annotations

from mockskill.audit import report
from mockskill.audit.table import table
from mockskill.engine.state import Entry


def attempt(id: int, started: float, **fields: object) -> Entry:
    base: dict[str, object] = {
        "id": id,
        "started": started,
        "finished": started + 0.5,
        "session": "s",
        "method": "POST",
        "path": "/skills/slow/invoke",
        "status": 200,
        "endpoint": "invoke",
        "skill": "slow",
    }
    return Entry(**{**base, **fields})  # type: ignore[arg-type]


def test_a_success_whose_slow_body_the_client_left_unread_shows_as_left_not_as_200() -> None:
    abandoned = attempt(1, 100.0, headers_sent=100.0, client_left=100.3)
    whole = attempt(2, 102.0)
    text = table(report([abandoned, whole]))
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("      ")}
    assert "200, body unread: client left" in rows["1"], text
    assert "body unread" not in rows["2"], text
