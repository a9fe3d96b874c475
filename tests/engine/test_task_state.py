"""The in-memory store's long-running tasks: Submit (numbered store-wide, never again while
the server runs, capped) and Touch (polls counted, events logged and bounded, an input
fitting no phase not logged, kept as asked, then forgotten)."""

from __future__ import annotations

import time

from mockskill.engine.state import State
from mockskill.engine.store import MAX_TASK_EVENTS, Submit, Submitted, TaskRecord, Touch


def submit(state: State, session: str = "s", keep_ms: int = 60_000, limit: int = 10) -> Submitted:
    answer = state.answer(Submit(session, "demo/report", keep_ms, limit))
    assert isinstance(answer, Submitted)
    return answer


def touch(
    state: State,
    number: int,
    action: str = "poll",
    session: str = "s",
    keep_ms: int = 0,
    fits: tuple[int, ...] = (),
) -> TaskRecord | None:
    answer = state.answer(Touch(session, number, action, keep_ms, "demo/report", fits))
    assert answer is None or isinstance(answer, TaskRecord)
    return answer


def test_tasks_are_numbered_store_wide_from_zero_on_the_store_clock() -> None:
    state = State()
    before = time.time() * 1000
    first, second = submit(state), submit(state)
    other = submit(state, session="t")
    assert (first.number, second.number, other.number) == (0, 1, 2)
    assert before <= first.at_ms <= second.at_ms <= time.time() * 1000


def test_a_touch_counts_polls_and_logs_cancels_and_inputs_with_the_polls_before_them() -> None:
    state = State()
    number = submit(state).number
    assert number is not None
    assert touch(state, number).polls == 1  # type: ignore[union-attr]
    cancelled = touch(state, number, "cancel")
    assert cancelled is not None
    assert cancelled.polls == 1
    assert [(e.action, e.polls, e.at_ms) for e in cancelled.events] == [
        ("cancel", 1, cancelled.now_ms)
    ]
    polled = touch(state, number)
    assert polled is not None
    assert (polled.polls, polled.skill, len(polled.events)) == (2, "demo/report", 1)
    assert polled.submitted_ms <= polled.events[0].at_ms <= polled.now_ms


def test_events_are_kept_up_to_their_bound() -> None:
    state = State()
    number = submit(state).number
    assert number is not None
    for _ in range(MAX_TASK_EVENTS + 5):
        last = touch(state, number, "input", fits=(1,))
    assert last is not None
    assert len(last.events) == MAX_TASK_EVENTS
    assert last.events[0].fits == (1,)


def test_an_input_that_fits_no_phase_is_not_logged_and_spends_no_event() -> None:
    state = State()
    number = submit(state).number
    assert number is not None
    for _ in range(MAX_TASK_EVENTS + 5):
        unfit = touch(state, number, "input")
        assert unfit is not None
        assert unfit.events == ()
    fit = touch(state, number, "input", fits=(0,))
    assert fit is not None
    assert [(e.action, e.fits) for e in fit.events] == [("input", (0,))]


def test_an_unknown_task_is_none() -> None:
    state = State()
    assert touch(state, 0) is None
    submit(state)
    assert touch(state, 1) is None
    assert touch(state, 0, session="other") is None


def test_a_task_is_forgotten_after_its_time_unless_a_touch_kept_it_longer() -> None:
    state = State()
    short = submit(state, keep_ms=50).number
    kept = submit(state, keep_ms=50).number
    assert short is not None
    assert kept is not None
    assert touch(state, kept, keep_ms=500) is not None
    time.sleep(0.1)
    assert touch(state, short) is None
    assert touch(state, kept) is not None


def test_the_cap_counts_the_tasks_not_yet_forgotten() -> None:
    state = State()
    assert submit(state, keep_ms=80, limit=2).number == 0
    assert submit(state, keep_ms=80, limit=2).number == 1
    refused = submit(state, keep_ms=80, limit=2)
    assert refused.number is None
    assert submit(state, session="other", limit=2).number is None  # the cap is the server's
    time.sleep(0.12)  # both forgotten: room again
    assert submit(state, limit=2).number == 2


def test_a_reset_forgets_tasks_but_never_hands_their_numbers_out_again() -> None:
    state = State()
    submit(state), submit(state), submit(state, session="t")
    state.reset(session="s")
    assert touch(state, 0) is None
    assert touch(state, 2, session="t") is not None
    assert submit(state).number == 3
    state.reset()
    assert touch(state, 2, session="t") is None
    assert submit(state, session="t", limit=1).number == 4


def test_numbers_go_on_past_the_sessions_bound() -> None:
    state = State(max_sessions=2)
    numbers = [submit(state, session=name, limit=100).number for name in "abcdefa"]
    assert numbers == list(range(7))


def test_a_task_touched_at_another_skills_url_is_not_found_and_not_counted() -> None:
    state = State()
    number = submit(state).number
    assert number is not None
    assert state.answer(Touch("s", number, "poll", 60_000, "demo/other")) is None
    record = state.answer(Touch("s", number, "poll", 60_000, "demo/report"))
    assert isinstance(record, TaskRecord)
    assert record.polls == 1
