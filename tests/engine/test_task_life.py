"""A task's life (engine/tasks.py): its state as a pure function of the scenario's ``task:``
and the store's record, as docs/tasks.md states it.

Each rule is shown on a small life, then checked as a property over lives drawn from a
seeded generator (the seed is in the test id, so a failure replays).
"""

from __future__ import annotations

import random

import pytest

from mockskill.engine import tasks
from mockskill.engine.store import MAX_TASK_EVENTS, TaskEvent, TaskRecord
from mockskill.engine.tasks import (
    FINISHED,
    INPUT_INVALID,
    NOT_AWAITING_INPUT,
    NOT_CANCELLABLE,
    TaskView,
    keep_ms,
    keep_ms_at_submit,
    refusal,
    view,
)
from mockskill.scenario.model import TERMINAL_STATUSES, Reply, Task, TaskPhase
from mockskill.scenario.source import Position

HERE = Position("tasks.yaml", 1, 1)
T0 = 1_764_840_000_000.0
"""A submission time (epoch ms): the life is relative to it."""


def phase(status: str, **kw: object) -> TaskPhase:
    return TaskPhase(status, HERE, **kw)  # type: ignore[arg-type]


def task(*life: TaskPhase, **kw: object) -> Task:
    return Task(life=life, where=HERE, **kw)  # type: ignore[arg-type]


DONE = phase("completed", reply=Reply.json(200, {"report": "done"}))
REPORT = task(
    phase("submitted", duration_ms=1000),
    phase("working", duration_ms=6000, progress=(10, 40, 80), poll_after_ms=2000),
    DONE,
    cancellable=("submitted", "working"),
    cancel_settle_ms=500,
)
"""docs/tasks.md's example: submitted 1 s, working 6 s with progress, then completed."""


def event(action: str, at: float, polls: int = 0, fits: tuple[int, ...] = ()) -> TaskEvent:
    """*action* at *at* ms after the submission; an input's *fits*: the phases it meets."""
    return TaskEvent(action, T0 + at, polls, fits)


def record(at: float, polls: int = 0, *events: TaskEvent) -> TaskRecord:
    """The record a store answers at *at* ms after the submission."""
    return TaskRecord("scenario/report", T0, polls, events, T0 + at)


def at(t: Task, ms: float, polls: int = 0, *events: TaskEvent) -> TaskView:
    return view(t, record(ms, polls, *events))


# -- time ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ms", "status"),
    [
        pytest.param(0, "submitted", id="at-submit"),
        pytest.param(999.9, "submitted", id="just-before-1s"),
        pytest.param(1000, "working", id="at-1s"),
        pytest.param(1000.1, "working", id="just-after-1s"),
        pytest.param(6999.9, "working", id="just-before-7s"),
        pytest.param(7000, "completed", id="at-7s"),
        pytest.param(7000.1, "completed", id="just-after-7s"),
    ],
)
def test_a_poll_sees_the_phase_whose_time_it_falls_in(ms: float, status: str) -> None:
    assert at(REPORT, ms, 1).status == status


def test_a_live_task_settles_when_its_timed_phases_are_over() -> None:
    early = at(REPORT, 10)
    assert early.terminal_at_ms is None
    assert early.settles_at_ms == T0 + 7000
    done = at(REPORT, 9000)
    assert done.terminal_at_ms == T0 + 7000
    assert done.settles_at_ms == T0 + 7000
    assert (done.status, done.phase) == ("completed", 2)


@pytest.mark.parametrize(
    ("ms", "progress"),
    [
        pytest.param(500, None, id="submitted-scripts-none"),
        pytest.param(1000, 10, id="first-third"),
        pytest.param(2999.9, 10, id="first-third-end"),
        pytest.param(3000, 40, id="second-third"),
        pytest.param(5000, 80, id="last-third"),
        pytest.param(6999.9, 80, id="last-third-end"),
        pytest.param(7000, None, id="completed-scripts-none"),
    ],
)
def test_progress_is_spread_evenly_over_its_phase(ms: float, progress: int | None) -> None:
    assert at(REPORT, ms).progress == progress


@pytest.mark.parametrize(
    ("ms", "poll_after"),
    [
        pytest.param(0, 1000, id="submitted-task-default"),
        pytest.param(1000, 2000, id="working-its-own"),
        pytest.param(7000, None, id="completed-none"),
    ],
)
def test_poll_after_is_the_phases_or_the_tasks(ms: float, poll_after: int | None) -> None:
    assert at(REPORT, ms).poll_after_ms == poll_after


def test_a_task_expires_its_ttl_after_it_ended() -> None:
    t = task(phase("working", duration_ms=100), phase("failed"), ttl_ms=2000)
    assert not at(t, 2099.9).expired
    gone = at(t, 2100)
    assert gone.expired
    assert gone.status == "failed"  # what it was, for the journal
    assert not at(t, 50).expired  # a live task never is


# -- polls --------------------------------------------------------------------------


def test_a_polls_phase_answers_that_many_polls() -> None:
    t = task(phase("submitted", polls=1), phase("working", polls=2), DONE)
    seen = [at(t, 10.0 * n, n).status for n in range(1, 6)]
    assert seen == ["submitted", "working", "working", "completed", "completed"]


def test_a_polls_phase_does_not_move_with_time() -> None:
    t = task(phase("working", polls=3), DONE)
    assert at(t, 10**9, 3).status == "working"
    assert at(t, 10**9, 3).settles_at_ms is None
    assert at(t, 1, 4).status == "completed"


def test_progress_over_polls_changes_at_even_shares_of_them() -> None:
    t = task(phase("working", polls=4, progress=(25, 50, 75, 100)), DONE)
    assert [at(t, 0, n).progress for n in range(1, 5)] == [25, 50, 75, 100]
    t = task(phase("working", polls=4, progress=(10, 90)), DONE)
    assert [at(t, 0, n).progress for n in range(1, 5)] == [10, 10, 90, 90]


def test_a_polls_phase_after_a_timed_one_counts_the_polls_made_since_it_began() -> None:
    t = task(phase("submitted", duration_ms=1000), phase("working", polls=3), DONE)
    # A consumer that waits the advised second: its polls 1 to 3 see working.
    seen = [at(t, 1000.0 * n, n).status for n in range(1, 5)]
    assert seen == ["working", "working", "working", "completed"]


def test_a_timed_phase_after_a_polls_phase_is_timed_from_the_last_moment_known() -> None:
    # No poll's time is kept: the known moment before the ending poll is the input.
    t = task(
        phase("input_required"),
        phase("submitted", polls=1),
        phase("working", duration_ms=1000),
        DONE,
    )
    entered = event("input", 5000, 0, fits=(0,))
    assert at(t, 5500, 1, entered).status == "submitted"
    assert at(t, 5600, 2, entered).status == "working"
    assert at(t, 6000, 3, entered).status == "completed"
    assert at(t, 6000, 3, entered).terminal_at_ms == T0 + 6000


# -- cancels ------------------------------------------------------------------------


def test_a_cancel_settles_then_the_task_is_cancelled() -> None:
    cancel = event("cancel", 2000)
    assert refusal(REPORT, record(2000, 0, cancel), "cancel") is None
    during = at(REPORT, 2499.9, 0, cancel)
    assert (during.status, during.cancelling, during.progress) == ("working", True, 10)
    assert during.settles_at_ms == T0 + 2500
    after = at(REPORT, 2500, 0, cancel)
    assert (after.status, after.cancelling, after.terminal_at_ms) == (
        "cancelled",
        False,
        T0 + 2500,
    )
    assert after.poll_after_ms is None
    long_after = at(REPORT, 9000, 0, cancel)
    assert long_after.status == "cancelled"  # the life's end no longer counts
    assert long_after.progress == 10  # as the settle ended


def test_a_cancel_loses_the_race_when_the_life_ends_within_the_settle() -> None:
    cancel = event("cancel", 6800)
    assert at(REPORT, 6900, 0, cancel).cancelling
    assert at(REPORT, 6900, 0, cancel).settles_at_ms == T0 + 7000
    won = at(REPORT, 7000, 0, cancel)
    assert (won.status, won.cancelling, won.terminal_at_ms) == ("completed", False, T0 + 7000)
    assert at(REPORT, 7300, 0, cancel).status == "completed"


def test_a_tie_between_the_life_and_the_settle_goes_to_the_life() -> None:
    cancel = event("cancel", 6500)
    assert at(REPORT, 7000, 0, cancel).status == "completed"


def test_a_cancel_without_settle_cancels_at_once() -> None:
    t = task(phase("working", duration_ms=6000), DONE)
    cancel = event("cancel", 100)
    assert refusal(t, record(100, 0, cancel), "cancel") is None
    now = at(t, 100, 0, cancel)
    assert (now.status, now.terminal_at_ms, now.cancelling) == ("cancelled", T0 + 100, False)


def test_a_cancel_in_a_status_not_allowed_is_refused_and_changes_nothing() -> None:
    t = task(phase("submitted", duration_ms=1000), phase("working", duration_ms=1000), DONE,
             cancellable=("working",))  # fmt: skip
    early = event("cancel", 500)
    assert refusal(t, record(500, 0, early), "cancel") == NOT_CANCELLABLE
    assert not at(t, 600, 0, early).cancelling
    assert at(t, 2000, 0, early).status == "completed"
    late = event("cancel", 1500)
    assert refusal(t, record(1500, 0, early, late), "cancel") is None
    assert at(t, 1500, 0, early, late).status == "cancelled"


def test_a_cancel_of_a_finished_task_is_refused() -> None:
    cancel = event("cancel", 8000)
    assert refusal(REPORT, record(8000, 0, cancel), "cancel") == FINISHED
    assert at(REPORT, 8000, 0, cancel).status == "completed"
    # And of one cancelled already:
    first, second = event("cancel", 2000), event("cancel", 3000)
    assert refusal(REPORT, record(3000, 0, first, second), "cancel") == FINISHED


def test_a_second_cancel_while_settling_counts_but_does_not_move_the_settle() -> None:
    first, second = event("cancel", 2000), event("cancel", 2400)
    assert refusal(REPORT, record(2400, 0, first, second), "cancel") is None
    assert at(REPORT, 2500, 0, first, second).status == "cancelled"


def test_a_polls_phase_does_not_end_while_a_cancel_settles() -> None:
    # Which came first, the settle's end or the ending poll, is not kept: the settle wins.
    t = task(phase("working", polls=2), DONE, cancel_settle_ms=500)
    cancel = event("cancel", 100, 1)
    assert at(t, 200, 3, cancel).status == "working"
    assert at(t, 600, 4, cancel).status == "cancelled"


def test_a_cancel_the_store_no_longer_logs_is_judged_all_the_same() -> None:
    full = tuple(event("cancel", 10.0 * n) for n in range(1, MAX_TASK_EVENTS + 1))
    t = task(phase("working", duration_ms=100_000), DONE, cancel_settle_ms=50_000)
    assert refusal(t, record(5000, 0, *full), "cancel") is None
    late = task(phase("working", duration_ms=1000), DONE, cancel_settle_ms=50_000)
    assert refusal(late, record(5000, 0, *full), "cancel") == FINISHED


def test_a_scripted_cancelled_is_the_providers_own_cancel() -> None:
    t = task(phase("working", duration_ms=100), phase("cancelled"))
    ended = at(t, 100)
    assert (ended.status, ended.terminal_at_ms, ended.cancelling) == ("cancelled", T0 + 100, False)


# -- input --------------------------------------------------------------------------

ASKS = task(
    phase("submitted", duration_ms=1000),
    phase("input_required", poll_after_ms=500),
    phase("working", duration_ms=2000),
    DONE,
)


def test_an_input_required_task_waits_for_its_input() -> None:
    waiting = at(ASKS, 10**8, 50)
    assert (waiting.status, waiting.poll_after_ms, waiting.settles_at_ms) == (
        "input_required",
        500,
        None,
    )
    given = event("input", 5000, 3, fits=(1,))
    assert refusal(ASKS, record(5000, 3, given), "input", (1,)) is None
    assert at(ASKS, 6999.9, 4, given).status == "working"
    assert at(ASKS, 6999.9, 4, given).settles_at_ms == T0 + 7000
    assert at(ASKS, 7000, 4, given).status == "completed"


def test_an_input_in_the_wrong_state_is_refused_and_ignored() -> None:
    early = event("input", 500, fits=(1,))
    assert refusal(ASKS, record(500, 0, early), "input", (1,)) == NOT_AWAITING_INPUT
    assert at(ASKS, 5000, 0, early).status == "input_required"
    given, again = event("input", 5000, fits=(1,)), event("input", 5100, fits=(1,))
    assert refusal(ASKS, record(5100, 0, given, again), "input", (1,)) == NOT_AWAITING_INPUT
    assert at(ASKS, 7000, 0, given, again).status == "completed"
    late = event("input", 9000, fits=(1,))
    assert refusal(ASKS, record(9000, 0, given, late), "input", (1,)) == NOT_AWAITING_INPUT


TWO_ASKS = task(
    phase("input_required"),  # 0: asks for a name
    phase("working", duration_ms=1000),
    phase("input_required"),  # 2: asks for a confirmation
    DONE,
)


def test_an_input_counts_only_in_a_phase_its_body_fits() -> None:
    # The confirmation (fits phase 2) while the task asks for the name (phase 0): refused.
    confirm = event("input", 100, fits=(2,))
    assert refusal(TWO_ASKS, record(100, 0, confirm), "input", (2,)) == INPUT_INVALID
    assert at(TWO_ASKS, 5000, 0, confirm).phase == 0  # it counted for nothing
    name = event("input", 200, fits=(0,))
    assert refusal(TWO_ASKS, record(200, 0, confirm, name), "input", (0,)) is None
    assert at(TWO_ASKS, 1199, 0, confirm, name).status == "working"
    assert at(TWO_ASKS, 1200, 0, confirm, name).phase == 2
    # Now the name again is the wrong input; the confirmation is the one awaited.
    again = event("input", 1300, fits=(0,))
    assert refusal(TWO_ASKS, record(1300, 0, confirm, name, again), "input", (0,)) == (
        INPUT_INVALID
    )
    done = event("input", 1400, fits=(2,))
    events = (confirm, name, again, done)
    assert refusal(TWO_ASKS, record(1400, 0, *events), "input", (2,)) is None
    assert at(TWO_ASKS, 1400, 0, *events).status == "completed"


def test_an_input_fitting_every_phase_counts_in_each_in_turn() -> None:
    first, second = event("input", 100, fits=(0, 2)), event("input", 1500, fits=(0, 2))
    assert at(TWO_ASKS, 1500, 0, first, second).status == "completed"


def test_an_input_fitting_no_phase_is_refused_as_invalid_only_while_input_is_awaited() -> None:
    assert refusal(TWO_ASKS, record(100), "input") == INPUT_INVALID
    name = event("input", 200, fits=(0,))
    assert refusal(TWO_ASKS, record(500, 0, name), "input") == NOT_AWAITING_INPUT


def test_a_task_cancelled_while_awaiting_input_is_cancelled_when_the_settle_ends() -> None:
    t = task(phase("input_required"), DONE, cancel_settle_ms=300)
    cancel = event("cancel", 1000)
    assert at(t, 1200, 0, cancel).settles_at_ms == T0 + 1300
    assert at(t, 1300, 0, cancel).status == "cancelled"


# -- how long the store keeps it ------------------------------------------------------


def test_the_store_keeps_a_task_until_its_ttl_runs_out() -> None:
    assert keep_ms_at_submit(REPORT) == 7000 + REPORT.ttl_ms
    assert keep_ms(REPORT, at(REPORT, 3000), T0 + 3000) == 4000 + REPORT.ttl_ms
    assert keep_ms(REPORT, at(REPORT, 8000.5), T0 + 8000.5) == REPORT.ttl_ms - 1000
    assert keep_ms(REPORT, at(REPORT, 10**9), T0 + 10**9) == 0


def test_a_waiting_task_is_kept_its_ttl_and_its_timed_rest_from_each_request() -> None:
    now = 10**6
    assert keep_ms(ASKS, at(ASKS, now), T0 + now) == 2000 + ASKS.ttl_ms


# -- properties over drawn lives -------------------------------------------------------

SEEDS = [pytest.param(seed, id=f"seed-{seed}") for seed in range(40)]


def timed_life(rng: random.Random) -> Task:
    live = ("submitted", "working")
    phases = [
        phase(
            rng.choice(live),
            duration_ms=rng.randrange(0, 5000),
            progress=tuple(sorted(rng.sample(range(1, 100), rng.randrange(0, 4)))),
            poll_after_ms=rng.choice([None, rng.randrange(0, 5000)]),
        )
        for _ in range(rng.randrange(1, 5))
    ]
    end = rng.choice(TERMINAL_STATUSES)
    return task(*phases, phase(end), poll_after_ms=rng.randrange(1, 3000))


def expected_at(t: Task, ms: float) -> tuple[int, int | None]:
    """The phase and progress at *ms*, worked out here from the life's intervals."""
    begin = 0.0
    for index, p in enumerate(t.life):
        if p.duration_ms is None or ms < begin + p.duration_ms:
            if not p.progress or p.terminal:
                return index, p.progress[-1] if p.progress else None
            share = int((ms - begin) * len(p.progress) // p.duration_ms)  # type: ignore[operator]
            return index, p.progress[min(share, len(p.progress) - 1)]
        begin += p.duration_ms
    raise AssertionError("the last phase is terminal")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_timed_life_is_its_intervals(seed: int) -> None:
    rng = random.Random(seed)
    t = timed_life(rng)
    bounds = [0.0]
    for p in t.life[:-1]:
        bounds.append(bounds[-1] + (p.duration_ms or 0))
    moments = {b + d for b in bounds for d in (-0.001, 0.0, 0.001)} | {
        rng.uniform(0, bounds[-1] + 1000) for _ in range(30)
    }
    for ms in sorted(m for m in moments if m >= 0):
        seen = at(t, ms, rng.randrange(0, 5))
        index, progress = expected_at(t, ms)
        assert (seen.phase, seen.status, seen.progress) == (index, t.life[index].status, progress)
        assert (seen.terminal_at_ms is not None) == (index == len(t.life) - 1)
        assert seen.settles_at_ms == T0 + bounds[-1]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_life_on_polls_is_its_counts(seed: int) -> None:
    rng = random.Random(seed)
    counts = [rng.randrange(1, 5) for _ in range(rng.randrange(1, 5))]
    t = task(*(phase("working", polls=n) for n in counts), phase("completed"))
    expected = [index for index, n in enumerate(counts) for _ in range(n)]
    seen = [at(t, rng.uniform(0, 10**7), polls).phase for polls in range(1, len(expected) + 3)]
    assert seen == [*expected, len(counts), len(counts)]
    assert at(t, 0, 0).phase == 0  # before the first poll


def mixed_life(rng: random.Random) -> Task:
    phases = []
    for _ in range(rng.randrange(1, 5)):
        kind = rng.choice(["for", "polls", "input"])
        if kind == "for":
            phases.append(phase("working", duration_ms=rng.randrange(0, 3000)))
        elif kind == "polls":
            phases.append(phase("submitted", polls=rng.randrange(0, 4)))
        else:
            phases.append(phase("input_required"))
    return task(
        *phases,
        phase(rng.choice(TERMINAL_STATUSES)),
        cancellable=tuple(rng.sample(("submitted", "working", "input_required"), 2)),
        cancel_settle_ms=rng.choice([0, rng.randrange(0, 2000)]),
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_what_a_task_showed_it_never_takes_back(seed: int) -> None:
    """Polls, cancels and inputs at random: once a task showed a terminal status, every
    later answer shows the same, from the same moment; a live one only moves forward."""
    rng = random.Random(seed)
    t = mixed_life(rng)
    now, polls = 0.0, 0
    events: list[TaskEvent] = []
    shown: list[tuple[TaskRecord, TaskView]] = []
    for _ in range(60):
        now += rng.choice([0.0, rng.uniform(0, 800)])
        action = rng.choices(["poll", "cancel", "input"], [8, 1, 2])[0]
        if action == "poll":
            polls += 1
        elif len(events) < MAX_TASK_EVENTS:
            fits = tuple(i for i, p in enumerate(t.life) if p.status == "input_required")
            events.append(TaskEvent(action, T0 + now, polls, fits))
        rec = record(now, polls, *events)
        seen = view(t, rec)
        shown.append((rec, seen))
        previous = shown[-2][1] if len(shown) > 1 else None
        if previous is not None and previous.terminal_at_ms is not None:
            assert seen.status == previous.status
            assert seen.terminal_at_ms == previous.terminal_at_ms
        if previous is not None and previous.terminal_at_ms is None:
            assert seen.phase >= previous.phase
        if seen.terminal_at_ms is not None:
            assert seen.poll_after_ms is None
            assert not seen.cancelling
            assert seen.terminal_at_ms <= T0 + now


@pytest.mark.parametrize("seed", SEEDS)
def test_a_cancel_counts_exactly_when_its_moment_allowed_it(seed: int) -> None:
    rng = random.Random(seed)
    t = timed_life(rng)
    t = task(*t.life, cancellable=tuple(rng.sample(("submitted", "working"), rng.randrange(3))))
    moment = rng.uniform(0, sum(p.duration_ms or 0 for p in t.life) + 500)
    before = at(t, moment)
    cancel = event("cancel", moment)
    outcome = refusal(t, record(moment, 0, cancel), "cancel")
    if before.terminal_at_ms is not None:
        assert outcome == FINISHED
    elif before.status not in t.cancellable:
        assert outcome == NOT_CANCELLABLE
    else:
        assert outcome is None
        assert at(t, moment, 0, cancel).status == "cancelled"  # settle 0: at once
    if outcome is not None:
        later = moment + 10_000
        assert at(t, later, 0, cancel) == at(t, later)


def test_a_view_is_a_named_tuple_of_the_contracts_fields() -> None:
    assert TaskView._fields == (
        "status",
        "phase",
        "progress",
        "poll_after_ms",
        "cancelling",
        "terminal_at_ms",
        "expired",
        "settles_at_ms",
    )
    assert tasks.submitted_record("s/x", T0) == TaskRecord("s/x", T0, 0, (), T0)
