"""A task's state when nothing was logged (engine/tasks.py's view of a poll): looked up on
the life's timeline, made once per ``task:``, it is the state the walk through the record
gives — at every moment, at each boundary and a millisecond either side of it.

An input logged while no phase awaits one counts for nothing (docs/tasks.md), so a record
holding one is walked, and must agree with the same record without it.
"""

from __future__ import annotations

import random

import pytest

from mockskill.engine.store import TaskEvent, TaskRecord
from mockskill.engine.tasks import view
from mockskill.scenario.model import Reply, Task, TaskPhase
from mockskill.scenario.source import Position

HERE = Position("tasks.yaml", 1, 1)
T0 = 1_764_840_000_123.0


def phase(status: str, **kw: object) -> TaskPhase:
    return TaskPhase(status, HERE, **kw)  # type: ignore[arg-type]


def lives(seed: int) -> Task:
    """A life on time, drawn: ``for:`` phases (some of 0, some with progress), then a
    terminal phase, or a phase counted by polls before it."""
    rng = random.Random(seed)
    life = []
    for _ in range(rng.randint(0, 4)):
        progress = tuple(sorted(rng.sample(range(1, 100), rng.randint(0, 3))))
        life.append(
            phase(
                rng.choice(("submitted", "working")),
                duration_ms=rng.choice((0, 1, 250, 1000, 3_600_000)),
                progress=progress,
                poll_after_ms=rng.choice((None, 500, 2500)),
            )
        )
    if rng.random() < 0.3:
        life.append(phase("working", polls=rng.randint(1, 3), progress=(50,)))
    last = rng.choice(("completed", "failed", "cancelled"))
    reply = Reply.json(200, {"report": "done"}) if last == "completed" else None
    life.append(phase(last, progress=(100,) if rng.random() < 0.5 else (), reply=reply))
    return Task(life=tuple(life), where=HERE, ttl_ms=rng.choice((0, 1000, 300_000)))


def moments(task: Task) -> list[float]:
    """Each boundary of the life, a millisecond and a fraction of one either side, and
    moments within its phases and past its time-to-live."""
    out = [-1.0, 0.0, 0.5]
    at = 0.0
    for p in task.life:
        at += p.duration_ms or 0
        out += [at - 1, at - 0.25, at, at + 0.25, at + 1, at / 2, at / 3]
    return [*out, at + task.ttl_ms - 1, at + task.ttl_ms, at + task.ttl_ms + 1, 10 * at + 7]


@pytest.mark.parametrize("seed", range(200))
def test_a_task_with_nothing_logged_is_in_the_state_its_walked_life_gives(seed: int) -> None:
    task = lives(seed)
    ignored = TaskEvent("input", T0 - 2, 0)  # (no phase awaits input: it counts for nothing)
    for ms in moments(task):
        for polls in (1, 2, 5):
            alone = TaskRecord("s/report", T0, polls, (), T0 + ms)
            walked = TaskRecord("s/report", T0, polls, (ignored,), T0 + ms)
            assert view(task, alone) == view(task, walked), (ms, polls)


def test_a_poll_a_millisecond_after_a_boundary_sees_the_next_phase() -> None:
    task = Task(
        life=(
            phase("submitted", duration_ms=300),
            phase("working", duration_ms=300, progress=(20, 60)),
            phase("completed", reply=Reply.json(200, {"report": "done"})),
        ),
        where=HERE,
    )

    def at(ms: float) -> tuple[str, int | None]:
        seen = view(task, TaskRecord("s/report", T0, 1, (), T0 + ms))
        return seen.status, seen.progress

    assert at(299.9) == ("submitted", None)
    assert at(300) == at(301) == ("working", 20)
    assert at(449.9) == ("working", 20)
    assert at(450) == ("working", 60)
    assert at(599.9) == ("working", 60)
    assert at(600) == at(601) == ("completed", None)
