"""Hand-made journals of one session's requests on long-running tasks, for the audit's
task and callback rules (tests/audit/test_task_rules.py, test_callback_rules.py): entries
as the server journals them, times in seconds from an arbitrary origin."""

from __future__ import annotations

from typing import Any

from mockskill.engine.entries import Entry

T0 = 1_000_000.0
SKILL = "report"
INVOKE = f"/skills/{SKILL}/invoke"


def url(task: str) -> str:
    """The status URL of *task* (of :data:`SKILL`)."""
    return f"/skills/{SKILL}/tasks/{task}"


class TaskJournal:
    """One session's entries, made in order: ids count up."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(
        self,
        at: float,
        method: str,
        path: str,
        status: int | None,
        endpoint: str,
        *,
        took: float = 0.125,
        task: dict[str, Any],
        **fields: Any,
    ) -> Entry:
        """An entry of session ``s`` started *at* seconds from :data:`T0`, *took* long."""
        entry = Entry(
            len(self.entries) + 1,
            T0 + at,
            T0 + at + took,
            "s",
            method,
            path,
            status,
            endpoint,
            skill=SKILL,
            task=task,
            **fields,
        )
        self.entries.append(entry)
        return entry
