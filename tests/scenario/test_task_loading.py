"""A skill's ``task:`` and a step's ``task: submit|status``: what loads, what is refused.

The engine moves tasks on and the transport answers their status URLs; these tests hold
the loading side (scenario/tasks.py, scenario/durations.py, the ``task:`` step of
scenario/steps.py, scenario/skills.py): the model a good file gives, every positioned
problem a bad one gets, the docs' example, and the bundled ``tasks`` scenario.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from conftest import assert_problem, column, problems_in

from mockskill import ScenarioError, bundled_path, load_paths, load_text
from mockskill.scenario.model import (
    CALLBACK_FAULTS,
    TERMINAL_STATUSES,
    Condition,
    Reply,
    Sequence,
    Skill,
    Step,
    Task,
    TaskCallback,
    TaskPhase,
)
from mockskill.scenario.problems import Problem

DOCS = Path(__file__).resolve().parents[2] / "docs"


def task_skill(body: str, *, before: str = "", after: str = "") -> str:
    """One skill ``s`` whose ``task:`` is *body* (block YAML, its first line on line 4 when
    *before* is empty); *before* and *after* are more keys of the skill (block YAML)."""
    return (
        "skills:\n  - id: s\n"
        + textwrap.indent(textwrap.dedent(before), "    ")
        + "    task:\n"
        + textwrap.indent(textwrap.dedent(body), "      ")
        + textwrap.indent(textwrap.dedent(after), "    ")
    )


def life(*phases: str, more: str = "") -> str:
    """A ``task:`` body: ``life:`` (line 4) with *phases* (flow mappings, phase i on line
    5 + i), then *more* keys of the task."""
    return "life:\n" + "".join(f"  - {phase}\n" for phase in phases) + more


def the_skill(text: str) -> Skill:
    [skill] = load_text(text, "s.yaml").skills
    return skill


def the_task(text: str) -> Task:
    task = the_skill(text).task
    assert task is not None
    return task


DONE = "{status: completed}"


# -- what a good file gives ------------------------------------------------------------


def test_the_briefs_example_loads_into_the_model_as_written() -> None:
    text = task_skill(
        """\
        poll_after: 1s
        ttl: 5m
        cancel: {allowed: [submitted, working], settle: 500ms}
        life:
          - {status: submitted, for: 1s}
          - {status: working, for: 6s, progress: [10, 40, 80], poll_after: 2s}
          - {status: completed, json: {report: done}}
        polls:
          - {error: ENDPOINT_UNREACHABLE, times: 2}
          - {task: status}
        """,
        after="""\
        invoke:
          - {error: ENDPOINT_UNREACHABLE, times: 1}
          - {task: submit}
        """,
    )
    skill = the_skill(text)
    task = skill.task
    assert task is not None
    assert (task.where.file, task.where.line, task.where.column) == ("s.yaml", 4, 7)
    assert (task.poll_after_ms, task.ttl_ms) == (1000, 300_000)
    assert (task.cancellable, task.cancel_settle_ms) == (("submitted", "working"), 500)
    submitted, working, completed = task.life
    assert submitted == TaskPhase("submitted", submitted.where, duration_ms=1000)
    assert (submitted.where.line, submitted.where.column) == (8, 11)
    assert working == TaskPhase(
        "working", working.where, duration_ms=6000, progress=(10, 40, 80), poll_after_ms=2000
    )
    assert completed == TaskPhase(
        "completed", completed.where, reply=Reply.json(200, {"report": "done"})
    )
    assert completed.terminal
    assert not working.terminal
    assert task.polls is not None
    assert [(s.reply.error_code, s.times, s.task) for s in task.polls.steps] == [
        ("ENDPOINT_UNREACHABLE", 2, None),
        (None, 1, "status"),
    ]
    assert skill.invoke is not None
    assert [(s.reply.error_code, s.times, s.task) for s in skill.invoke.steps] == [
        ("ENDPOINT_UNREACHABLE", 1, None),
        (None, 1, "submit"),
    ]


def test_what_a_task_leaves_out_is_the_defaults_and_its_invoke_submits_it() -> None:
    skill = the_skill(task_skill(life("{status: working, for: 2s}", DONE)))
    task = skill.task
    assert task is not None
    assert task == Task(task.life, task.where)  # every other field its default
    assert (task.poll_after_ms, task.ttl_ms, task.cancel_settle_ms) == (1000, 300_000, 0)
    assert task.cancellable == ("submitted", "working", "input_required")
    assert task.polls is None
    assert skill.invoke is not None
    assert skill.invoke == Sequence(
        (Step(skill.invoke.steps[0].reply, skill.where, task="submit"),)
    )
    assert skill.invoke.steps[0].reply.status == 202
    assert skill.invoke_cases == ()


def test_a_completed_phase_without_json_gives_the_default_invoke_result() -> None:
    [_, done] = the_task(task_skill(life("{status: working, for: 2s}", DONE))).life
    assert done.reply == Reply.json(200, {"skill": "s", "result": "ok"})


@pytest.mark.parametrize(
    ("written", "ms"),
    [
        ("500ms", 500),
        ("1s", 1000),
        ("1.5s", 1500),
        ("0.25s", 250),
        ("5m", 300_000),
        ("1h", 3_600_000),
        ("24h", 86_400_000),
    ],
)
def test_a_duration_is_read_in_its_unit(written: str, ms: int) -> None:
    [phase, _] = the_task(task_skill(life(f"{{status: working, for: {written}}}", DONE))).life
    assert phase.duration_ms == ms


def test_a_phase_may_last_a_number_of_polls() -> None:
    [phase, _] = the_task(
        task_skill(life("{status: working, polls: 3, progress: [50]}", DONE))
    ).life
    assert (phase.duration_ms, phase.polls, phase.progress) == (None, 3, (50,))


def test_a_failed_phase_holds_the_error_a_step_with_the_same_keys_answers() -> None:
    error = "error: EXECUTION_TIMEOUT, retry: {suggested_delay_ms: 2000, max_attempts: 2}"
    text = task_skill(
        life("{status: working, for: 1s}", f"{{status: failed, {error}, status_code: 408}}")
    )
    [_, failed] = the_task(text).life
    step_text = f"skills:\n  - id: s\n    invoke: {{{error}, status: 408}}\n"
    invoke = the_skill(step_text).invoke
    assert invoke is not None
    assert failed.reply == invoke.steps[0].reply
    assert failed.reply is not None
    assert (failed.reply.status, failed.reply.error_code) == (408, "EXECUTION_TIMEOUT")
    assert json.loads(failed.reply.body)["error"]["retry"] == {
        "suggested_delay_ms": 2000,
        "max_attempts": 2,
    }


def test_input_required_expects_what_a_cases_when_reads() -> None:
    when = "{body: {/answer: {exists: true}, /lang: en}, headers: {X-Tenant: {matches: '^t-'}}}"
    text = task_skill(life(f"{{status: input_required, expects: {when}, poll_after: 1s}}", DONE))
    [waiting, _] = the_task(text).life
    case_text = (
        "skills:\n  - id: s\n    invoke:\n      cases:\n"
        f"        - {{when: {when}, json: 1}}\n      steps: [json: 2]\n"
    )
    [case] = the_skill(case_text).invoke_cases

    def what(conditions: tuple[Condition, ...]) -> list[object]:
        return [(c.source, c.name, c.pointer, c.checks) for c in conditions]  # (not where)

    assert what(waiting.expects) == what(case.conditions)
    assert len(waiting.expects) == 3
    assert (waiting.duration_ms, waiting.polls, waiting.poll_after_ms) == (None, None, 1000)


def test_input_required_without_expects_takes_any_json_object() -> None:
    [waiting, _] = the_task(task_skill(life("{status: input_required}", DONE))).life
    assert waiting.expects == ()


@pytest.mark.parametrize("ending", TERMINAL_STATUSES)
def test_any_terminal_status_may_end_a_life(ending: str) -> None:
    extra = ", error: ENDPOINT_UNREACHABLE" if ending == "failed" else ""
    [_, last] = the_task(
        task_skill(life("{status: working, for: 1s}", f"{{status: {ending}{extra}}}"))
    ).life
    assert last.status == ending
    assert last.terminal


def test_a_life_may_be_its_terminal_phase_alone() -> None:
    [phase] = the_task(task_skill(life(DONE))).life
    assert phase.status == "completed"


def test_a_cancel_may_be_never_allowed_and_settle_at_once() -> None:
    task = the_task(task_skill(life(DONE, more="cancel: {allowed: [], settle: 0s}\n")))
    assert (task.cancellable, task.cancel_settle_ms) == ((), 0)


def test_a_task_with_a_rate_limit_keeps_both() -> None:
    skill = the_skill(task_skill(life(DONE), before="rate_limit: {capacity: 2, refill: 1}\n"))
    assert skill.rate_limit is not None
    assert skill.rate_limit.capacity == 2
    assert skill.task is not None


@pytest.mark.parametrize(
    "invoke",
    [
        pytest.param(
            "{task: submit, times: 2, delay: 5, set_state: Started}", id="with-times-delay-state"
        ),
        pytest.param("{one_of: [{task: submit}, {error: ENDPOINT_UNREACHABLE}]}", id="an-outcome"),
        pytest.param("{task: submit, failure_rate: 0.5}", id="with-a-failure-rate"),
        pytest.param(
            "{cases: [{when: {headers: {X-A: b}}, task: submit}], steps: [json: 1]}",
            id="a-case-only",
        ),
    ],
)
def test_the_invoke_may_submit_in_any_step_a_request_can_reach(invoke: str) -> None:
    skill = the_skill(task_skill(life(DONE), after=f"invoke: {invoke}\n"))
    assert skill.task is not None


def test_task_null_is_no_task() -> None:
    skill = the_skill("skills:\n  - id: s\n    task: null\n")
    assert skill.task is None
    assert json.loads(skill.descriptor)["capability_type"] == "api"


# -- the descriptor ----------------------------------------------------------------------


def test_a_task_skills_merged_descriptor_says_capability_type_task() -> None:
    skill = the_skill(task_skill(life(DONE), before="descriptor: {name: Reports}\n"))
    document = json.loads(skill.descriptor)
    assert document["capability_type"] == "task"
    assert document["name"] == "Reports"


def test_a_raw_descriptor_is_served_as_written_even_for_a_task() -> None:
    raw = '{"id": "s", "capability_type": "api"}'
    skill = the_skill(task_skill(life(DONE), before=f"raw_descriptor: {raw}\n"))
    assert skill.raw
    assert json.loads(skill.descriptor) == json.loads(raw)


def test_what_descriptor_writes_still_wins() -> None:
    skill = the_skill(task_skill(life(DONE), before="descriptor: {capability_type: plugin}\n"))
    assert json.loads(skill.descriptor)["capability_type"] == "plugin"


# -- positioned problems ----------------------------------------------------------------

# (id, text, path, line, token on that line where the problem points, expected, found, hint)
CASES: list[tuple[str, str, str, int, str, str, str, str]] = [
    (
        "unknown task key",
        task_skill(life(DONE, more="poll_every: 1s\n")),
        "skills[0].task.poll_every",
        6,
        "poll_every",
        "a known key",
        "unknown key 'poll_every'",
        "did you mean 'poll_after'?",
    ),
    (
        "unknown phase key",
        task_skill(life("{status: working, for: 1s, progres: [10]}", DONE)),
        "skills[0].task.life[0].progres",
        5,
        "progres",
        "a known key",
        "unknown key 'progres'",
        "did you mean 'progress'?",
    ),
    (
        "unknown cancel key",
        task_skill(life(DONE, more="cancel: {settel: 1s}\n")),
        "skills[0].task.cancel.settel",
        6,
        "settel",
        "a known key",
        "unknown key 'settel'",
        "did you mean 'settle'?",
    ),
    (
        "life missing",
        task_skill("poll_after: 1s\n"),
        "skills[0].task",
        4,
        "poll_after",
        "the key 'life'",
        "it missing",
        "",
    ),
    (
        "life empty",
        task_skill("life: []\n"),
        "skills[0].task.life",
        4,
        "[]",
        "a list of phases, the last terminal",
        "a list of 0 items",
        "",
    ),
    (
        "task not a mapping",
        "skills:\n  - id: s\n    task: 5\n",
        "skills[0].task",
        3,
        "5",
        "a task: a mapping with life:",
        "5 (an integer)",
        "",
    ),
    (
        "a status that is none",
        task_skill(life("{status: working, for: 1s}", "{status: complete}")),
        "skills[0].task.life[1].status",
        6,
        "complete",
        "one of submitted, working, input_required, completed, failed, cancelled",
        "'complete' (a string)",
        "did you mean 'completed'?",
    ),
    (
        "a phase without a status",
        task_skill(life("{for: 1s}", DONE)),
        "skills[0].task.life[0]",
        5,
        "{",
        "the key 'status'",
        "it missing",
        "",
    ),
    (
        "a terminal phase before the last",
        task_skill(life(DONE, "{status: working, for: 1s}", DONE)),
        "skills[0].task.life[0].status",
        5,
        "completed",
        "a terminal status (completed, failed, cancelled) in the last phase only",
        "'completed' in phase 1 of 3",
        "the phases after it would never be reached",
    ),
    (
        "a last phase that is live",
        task_skill(life("{status: submitted, for: 1s}", "{status: working, for: 1s}")),
        "skills[0].task.life[1].status",
        6,
        "working",
        "a terminal status in the last phase: completed, failed or cancelled",
        "'working', a live status",
        "say how it ends",
    ),
    (
        "a live phase that never ends",
        task_skill(life("{status: submitted}", DONE)),
        "skills[0].task.life[0]",
        5,
        "{",
        "for: DURATION or polls: N",
        "a submitted phase with neither: its states never end",
        "only input_required waits without either",
    ),
    (
        "both for and polls",
        task_skill(life("{status: working, for: 1s, polls: 2}", DONE)),
        "skills[0].task.life[0].polls",
        5,
        "polls",
        "for: or polls:",
        "both",
        "keep one",
    ),
    (
        "input_required for a time",
        task_skill(life("{status: input_required, for: 1s}", DONE)),
        "skills[0].task.life[0].for",
        5,
        "for",
        "no for: on an input_required phase",
        "for: 1s",
        "the consumer's input ends it",
    ),
    (
        "a terminal phase for a number of polls",
        task_skill(life("{status: completed, polls: 2}")),
        "skills[0].task.life[0].polls",
        5,
        "polls",
        "no polls: on a completed phase",
        "polls: 2",
        "lasts until its ttl",
    ),
    (
        "a negative duration",
        task_skill(life("{status: working, for: -2s}", DONE)),
        "skills[0].task.life[0].for",
        5,
        "-2s",
        "a duration with its unit: 500ms, 1s, 1.5s, 5m (more than 0, at most 24h)",
        "'-2s' (a string)",
        "a duration is never negative",
    ),
    (
        "a zero duration",
        task_skill(life("{status: working, for: 0s}", DONE)),
        "skills[0].task.life[0].for",
        5,
        "0s",
        "a duration with its unit",
        "'0s' (a string)",
        "a span of nothing never happens",
    ),
    (
        "a duration without its unit",
        task_skill(life("{status: working, for: 5}", DONE)),
        "skills[0].task.life[0].for",
        5,
        "5}",
        "a duration with its unit",
        "5 (an integer)",
        "write the unit: 5ms or 5s",
    ),
    (
        "a duration in an unknown unit",
        task_skill(life("{status: working, for: 2d}", DONE)),
        "skills[0].task.life[0].for",
        5,
        "2d",
        "a duration with its unit",
        "'2d' (a string)",
        "units: ms, s, m, h",
    ),
    (
        "a duration finer than a millisecond",
        task_skill(life("{status: working, for: 1.0005s}", DONE)),
        "skills[0].task.life[0].for",
        5,
        "1.0005s",
        "a duration with its unit",
        "'1.0005s' (a string)",
        "a whole number of ms",
    ),
    (
        "a phase longer than a day",
        task_skill(life("{status: working, for: 25h}", DONE)),
        "skills[0].task.life[0].for",
        5,
        "25h",
        "a duration with its unit: 500ms, 1s, 1.5s, 5m (more than 0, at most 24h)",
        "'25h' (a string)",
        "refused, not clamped",
    ),
    (
        "zero polls",
        task_skill(life("{status: working, polls: 0}", DONE)),
        "skills[0].task.life[0].polls",
        5,
        "0}",
        "a whole number from 1 to 1000000",
        "0 (an integer)",
        "",
    ),
    (
        "negative polls",
        task_skill(life("{status: working, polls: -1}", DONE)),
        "skills[0].task.life[0].polls",
        5,
        "-1",
        "a whole number from 1 to 1000000",
        "-1 (an integer)",
        "",
    ),
    (
        "a zero poll_after",
        task_skill(life(DONE, more="poll_after: 0s\n")),
        "skills[0].task.poll_after",
        6,
        "0s",
        "a duration with its unit",
        "'0s' (a string)",
        "a span of nothing",
    ),
    (
        "a poll_after longer than a step may wait",
        task_skill(life(DONE, more="poll_after: 6m\n")),
        "skills[0].task.poll_after",
        6,
        "6m",
        "a duration with its unit: 500ms, 1s, 1.5s, 5m (more than 0, at most 5m)",
        "'6m' (a string)",
        "refused, not clamped",
    ),
    (
        "a negative ttl",
        task_skill(life(DONE, more="ttl: -5m\n")),
        "skills[0].task.ttl",
        6,
        "-5m",
        "a duration with its unit",
        "'-5m' (a string)",
        "never negative",
    ),
    (
        "a zero ttl",
        task_skill(life(DONE, more="ttl: 0s\n")),
        "skills[0].task.ttl",
        6,
        "0s",
        "a duration with its unit",
        "'0s' (a string)",
        "a span of nothing",
    ),
    (
        "a negative settle",
        task_skill(life(DONE, more="cancel: {settle: -1s}\n")),
        "skills[0].task.cancel.settle",
        6,
        "-1s",
        "a duration with its unit: 500ms, 1s, 1.5s, 5m (at least 0ms",
        "'-1s' (a string)",
        "never negative",
    ),
    (
        "a phase's poll_after of zero",
        task_skill(life("{status: working, for: 1s, poll_after: 0ms}", DONE)),
        "skills[0].task.life[0].poll_after",
        5,
        "0ms",
        "a duration with its unit",
        "'0ms' (a string)",
        "a span of nothing",
    ),
    (
        "a terminal phase's poll_after",
        task_skill(life("{status: completed, poll_after: 1s}")),
        "skills[0].task.life[0].poll_after",
        5,
        "poll_after",
        "poll_after: only on live phases",
        "poll_after: on a completed phase",
        "a terminal answer has no Retry-After",
    ),
    (
        "progress above 100",
        task_skill(life("{status: working, for: 1s, progress: [10, 140]}", DONE)),
        "skills[0].task.life[0].progress[1]",
        5,
        "140",
        "a whole number from 0 to 100",
        "140 (an integer)",
        "",
    ),
    (
        "progress below 0",
        task_skill(life("{status: working, for: 1s, progress: [-5, 10]}", DONE)),
        "skills[0].task.life[0].progress[0]",
        5,
        "-5",
        "a whole number from 0 to 100",
        "-5 (an integer)",
        "",
    ),
    (
        "progress that does not rise",
        task_skill(life("{status: working, for: 1s, progress: [10, 40, 40]}", DONE)),
        "skills[0].task.life[0].progress[2]",
        5,
        "40]",
        "a percentage above the one before (40)",
        "40 (an integer)",
        "progress rises",
    ),
    (
        "progress that falls",
        task_skill(life("{status: working, polls: 4, progress: [80, 10]}", DONE)),
        "skills[0].task.life[0].progress[1]",
        5,
        "10]",
        "a percentage above the one before (80)",
        "10 (an integer)",
        "progress rises",
    ),
    (
        "progress that is not a list",
        task_skill(life("{status: working, for: 1s, progress: 50}", DONE)),
        "skills[0].task.life[0].progress",
        5,
        "50",
        "a list of percentages, rising",
        "50 (an integer)",
        "",
    ),
    (
        "progress on a phase that waits for input",
        task_skill(life("{status: input_required, progress: [50]}", DONE)),
        "skills[0].task.life[0].progress",
        5,
        "progress",
        "progress on a phase with for: or polls:",
        "progress on a phase without either (input_required)",
        "",
    ),
    (
        "json on a working phase",
        task_skill(life("{status: working, for: 1s, json: {a: 1}}", DONE)),
        "skills[0].task.life[0].json",
        5,
        "json",
        "json: only on a completed phase (its result)",
        "json: on a working phase",
        "",
    ),
    (
        "json on a failed phase",
        task_skill(life("{status: failed, error: ENDPOINT_UNREACHABLE, json: {a: 1}}")),
        "skills[0].task.life[0].json",
        5,
        "json",
        "json: only on a completed phase",
        "json: on a failed phase",
        "a failed task's error goes in error:",
    ),
    (
        "error on a completed phase",
        task_skill(life("{status: completed, error: EXECUTION_TIMEOUT}")),
        "skills[0].task.life[0].error",
        5,
        "error",
        "error: only on a failed phase (its error)",
        "error: on a completed phase",
        "",
    ),
    (
        "retry on a working phase",
        task_skill(life("{status: working, for: 1s, retry: {max_attempts: 2}}", DONE)),
        "skills[0].task.life[0].retry",
        5,
        "retry",
        "retry: only on a failed phase",
        "retry: on a working phase",
        "",
    ),
    (
        "a failed phase without its error",
        task_skill(life("{status: working, for: 1s}", "{status: failed}")),
        "skills[0].task.life[1]",
        6,
        "{",
        "the key 'error'",
        "it missing",
        "error: EXECUTION_TIMEOUT, say",
    ),
    (
        "a failed phase's status_code its code does not allow",
        task_skill(life("{status: failed, error: EXECUTION_TIMEOUT, status_code: 500}")),
        "skills[0].task.life[0].status_code",
        5,
        "500",
        "HTTP 504 or 408 for EXECUTION_TIMEOUT",
        "500 (an integer)",
        "EXECUTION_TIMEOUT is sent with HTTP 504 or 408",
    ),
    (
        "a failed phase's unknown code",
        task_skill(life("{status: failed, error: EXECUTION_TIMEDOUT}")),
        "skills[0].task.life[0].error",
        5,
        "EXECUTION_TIMEDOUT",
        "one of AUTH_REQUIRED",
        "'EXECUTION_TIMEDOUT' (a string)",
        "did you mean 'EXECUTION_TIMEOUT'?",
    ),
    (
        "a failed phase's retry advice on a code without it",
        task_skill(life("{status: failed, error: AUTH_REQUIRED, retry: {max_attempts: 2}}")),
        "skills[0].task.life[0].retry",
        5,
        "{max",
        "no retry advice",
        "a mapping with keys max_attempts",
        "AUTH_REQUIRED is not retryable",
    ),
    (
        "a result with placeholders",
        task_skill(life("{status: completed, json: {echo: '{{request.body}}'}}")),
        "skills[0].task.life[0].json",
        5,
        "{echo",
        "a fixed answer, without {{...}} placeholders",
        "placeholders",
        "the same for every poll",
    ),
    (
        "expects on a working phase",
        task_skill(life("{status: working, for: 1s, expects: {body: {/a: 1}}}", DONE)),
        "skills[0].task.life[0].expects",
        5,
        "expects",
        "expects: only on an input_required phase",
        "expects: on a working phase",
        "what the consumer's input must meet",
    ),
    (
        "expects read as when: is",
        task_skill(life("{status: input_required, expects: {bdy: {/a: 1}}}", DONE)),
        "skills[0].task.life[0].expects.bdy",
        5,
        "bdy",
        "a known key",
        "unknown key 'bdy'",
        "did you mean 'body'?",
    ),
    (
        "a cancel allowed in a terminal status",
        task_skill(life(DONE, more="cancel: {allowed: [working, completed]}\n")),
        "skills[0].task.cancel.allowed[1]",
        6,
        "completed",
        "a live status: submitted, working or input_required",
        "'completed', a terminal status",
        "a task that has ended cannot be cancelled",
    ),
    (
        "a cancel allowed in an unknown status",
        task_skill(life(DONE, more="cancel: {allowed: [workin]}\n")),
        "skills[0].task.cancel.allowed[0]",
        6,
        "workin",
        "one of submitted, working, input_required",
        "'workin' (a string)",
        "did you mean 'working'?",
    ),
    (
        "cancel's allowed not a list",
        task_skill(life(DONE, more="cancel: {allowed: working}\n")),
        "skills[0].task.cancel.allowed",
        6,
        "working",
        "a list of live statuses",
        "'working' (a string)",
        "",
    ),
    (
        "task: submit in a skill without task:",
        "skills:\n  - id: s\n    invoke: {task: submit}\n",
        "skills[0].invoke.task",
        3,
        "submit",
        "task: submit only in a task skill's invoke",
        "task: submit here",
        "give the skill a task:",
    ),
    (
        "task: submit on a route",
        "routes:\n  - {path: /a, steps: [{task: submit}]}\n",
        "routes[0].steps[0].task",
        2,
        "submit",
        "task: submit only in a task skill's invoke",
        "task: submit here",
        "give the skill a task:",
    ),
    (
        "task: submit in a task skill's describe",
        task_skill(life(DONE), after="describe: {task: submit}\n"),
        "skills[0].describe.task",
        6,
        "submit",
        "task: submit only in a task skill's invoke",
        "task: submit here",
        "give the skill a task:",
    ),
    (
        "task: submit in the polls",
        task_skill(life(DONE, more="polls: [{task: submit}]\n")),
        "skills[0].task.polls[0].task",
        6,
        "submit",
        "task: submit only in a task skill's invoke",
        "task: submit here",
        "give the skill a task:",
    ),
    (
        "task: status in a task skill's invoke",
        task_skill(life(DONE), after="invoke: [{task: status}, {task: submit}]\n"),
        "skills[0].invoke[0].task",
        6,
        "status",
        "task: status only in a task's polls:",
        "task: status here",
        "write it in the skill's task: polls:",
    ),
    (
        "task: status in a skill without task:",
        "skills:\n  - id: s\n    invoke: {task: status}\n",
        "skills[0].invoke.task",
        3,
        "status",
        "task: status only in a task's polls:",
        "task: status here",
        "task: polls:",
    ),
    (
        "task: a misspelt kind",
        task_skill(life(DONE), after="invoke: {task: sumbit}\n"),
        "skills[0].invoke.task",
        6,
        "sumbit",
        "one of submit, status",
        "'sumbit' (a string)",
        "did you mean 'submit'?",
    ),
    (
        "task: submit with an answer beside it",
        task_skill(life(DONE), after="invoke: {task: submit, json: {a: 1}}\n"),
        "skills[0].invoke.json",
        6,
        "json",
        "only times, delay and set_state beside task",
        "json as well",
        "the answer is the task's own",
    ),
    (
        "a task skill's invoke that never submits",
        task_skill(life(DONE), after="invoke: [{error: ENDPOINT_UNREACHABLE}, {json: {a: 1}}]\n"),
        "skills[0].invoke",
        6,
        "invoke",
        "a step with task: submit in the invoke of a task skill",
        "none: no invocation would start the task",
        "add {task: submit}",
    ),
    (
        "a task skill's cases that never submit",
        task_skill(life(DONE), after="invoke: {cases: [{when: {headers: {X-A: b}}, json: 1}]}\n"),
        "skills[0].invoke",
        6,
        "invoke",
        "a step with task: submit in the invoke of a task skill",
        "none",
        "add {task: submit}",
    ),
    (
        "a task skill that forwards its invoke",
        task_skill(life(DONE), before="proxy: 'http://h:1'\n"),
        "skills[0].proxy",
        3,
        "proxy",
        "a step with task: submit in the invoke of a task skill",
        "none",
        "write invoke: {task: submit}",
    ),
    (
        "a watch that is no boolean",
        task_skill(life(DONE, more="watch: 1\n")),
        "skills[0].task.watch",
        6,
        "1",
        "true, false, or {heartbeat: DURATION}",
        "1 (an integer)",
        "",
    ),
    (
        "a misspelt key of a watch",
        task_skill(life(DONE, more="watch: {beat: 1s}\n")),
        "skills[0].task.watch.beat",
        6,
        "beat",
        "a known key",
        "unknown key 'beat'",
        "did you mean 'heartbeat'?",
    ),
    (
        "a watch's heartbeat of nothing",
        task_skill(life(DONE, more="watch: {heartbeat: 0s}\n")),
        "skills[0].task.watch.heartbeat",
        6,
        "0s",
        "a duration with its unit: 500ms, 1s, 1.5s, 5m (more than 0, at most 5m)",
        "'0s' (a string)",
        "a span of nothing never happens: give it a length, or leave it out",
    ),
    (
        "a bad step in the polls",
        task_skill(life(DONE, more="polls: [{error: NOPE}]\n")),
        "skills[0].task.polls[0].error",
        6,
        "NOPE",
        "one of AUTH_REQUIRED",
        "'NOPE' (a string)",
        "",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "token", "expected", "found", "hint"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_a_bad_task_is_one_positioned_problem(
    text: str, path: str, line: int, token: str, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(text)
    assert problem.file == "s.yaml"
    assert_problem(problem, path, line, column(text, line, token), expected, found, hint)


def test_every_problem_of_a_task_is_reported_at_once() -> None:
    text = task_skill(
        life(
            "{status: submitted}",
            "{status: working, for: -1s, progress: [50, 20]}",
            "{status: completed, error: EXECUTION_TIMEOUT}",
            "{status: working, for: 1s}",
            more="ttl: 0s\ncancel: {allowed: [failed]}\n",
        )
    )
    paths = sorted(p.path for p in problems_in(text))
    assert paths == sorted(
        [
            "skills[0].task.ttl",
            "skills[0].task.cancel.allowed[0]",
            "skills[0].task.life[0]",
            "skills[0].task.life[1].for",
            "skills[0].task.life[1].progress[1]",
            "skills[0].task.life[2].error",
            "skills[0].task.life[2].status",
            "skills[0].task.life[3].status",
        ]
    )


# -- the docs and the bundled scenario --------------------------------------------------


def _section() -> str:
    text = (DOCS / "scenarios.md").read_text(encoding="utf-8")
    return text.split("\n## Long-running tasks\n", 1)[1].split("\n## ", 1)[0]


def test_the_docs_problem_lines_are_what_the_loader_says() -> None:
    shown = re.search(r"```text\n(tasks\.yaml:.*?)```", _section(), re.DOTALL)
    assert shown is not None
    text = "name: tasks\n" + task_skill(
        life("{status: working}", "{status: working, for: -2s}", "{status: completed}")
    ).replace("id: s", "id: report")
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "tasks.yaml")
    assert [str(p) for p in caught.value.problems] == shown.group(1).splitlines()


def test_the_docs_tables_name_every_key_the_loader_reads() -> None:
    from mockskill.scenario import tasks

    def first_column(heading: str) -> list[str]:
        rows = _section().split(f"\n{heading}\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
        return [row.split("|")[1].strip().strip("`") for row in rows]

    assert sorted(first_column("| key | meaning |")) == sorted(tasks.TASK_KEYS)
    phase_keys = first_column("A phase:\n\n| key | meaning |")
    assert set(phase_keys) == set(tasks.PHASE_KEYS) - {"status_code", "message", "details", "retry"}
    assert all(f"`{key}`" in _section() for key in (*tasks.PHASE_KEYS, *tasks.CANCEL_KEYS))


@pytest.fixture(scope="module")
def bundled() -> dict[str, Skill]:
    [scenario] = load_paths([bundled_path() / "tasks.yaml"]).scenarios
    return {skill.id: skill for skill in scenario.skills}


def _lasting(task: Task | None) -> list[tuple[str, int | None]]:
    assert task is not None
    return [(phase.status, phase.duration_ms) for phase in task.life]


def test_the_bundled_report_completes_after_6_s_with_progress(bundled: dict[str, Skill]) -> None:
    task = bundled["task-report"].task
    assert _lasting(task) == [("submitted", 1000), ("working", 5000), ("completed", None)]
    assert task is not None
    assert task.life[1].progress == (10, 40, 80)
    assert task.life[2].reply is not None
    assert json.loads(task.life[2].reply.body)["report"]


def test_the_bundled_timeout_fails_with_execution_timeout_and_advice(
    bundled: dict[str, Skill],
) -> None:
    task = bundled["task-timeout"].task
    assert _lasting(task) == [("submitted", 1000), ("working", 3000), ("failed", None)]
    assert task is not None
    failed = task.life[-1].reply
    assert failed is not None
    assert (failed.status, failed.error_code) == (504, "EXECUTION_TIMEOUT")
    assert json.loads(failed.body)["error"]["details"] == {"timeout_ms": 3000, "elapsed_ms": 3001}
    assert failed.retry is not None
    assert failed.retry.suggested_delay_ms == 2000


def test_the_bundled_input_task_waits_for_an_answer(bundled: dict[str, Skill]) -> None:
    task = bundled["task-input"].task
    assert _lasting(task) == [
        ("working", 1000),
        ("input_required", None),
        ("working", 2000),
        ("completed", None),
    ]
    assert task is not None
    [condition] = task.life[1].expects
    assert (condition.source, condition.name) == ("body", "/answer")


def test_the_bundled_cancel_task_works_long_and_settles_a_cancel(bundled: dict[str, Skill]) -> None:
    task = bundled["task-cancel"].task
    assert _lasting(task) == [("working", 30_000), ("completed", None)]
    assert task is not None
    assert (task.cancellable, task.cancel_settle_ms) == (
        ("submitted", "working", "input_required"),
        1000,
    )


def test_the_bundled_lost_callback_task_promises_a_callback_it_never_sends(
    bundled: dict[str, Skill],
) -> None:
    task = bundled["task-callback-lost"].task
    assert _lasting(task) == [("submitted", 1000), ("working", 2000), ("completed", None)]
    assert task is not None
    assert task.callback is not None
    assert task.callback.url_from == ("header", "X-Callback-Url")
    assert task.callback.faults == ("never",)
    assert task.callback.secret


def test_only_the_lost_callback_task_has_a_callback(bundled: dict[str, Skill]) -> None:
    hooked = [skill.id for skill in bundled.values() if skill.task and skill.task.callback]
    assert hooked == ["task-callback-lost"]


def test_every_bundled_task_skill_says_capability_type_task(bundled: dict[str, Skill]) -> None:
    assert sorted(bundled) == [
        "task-callback-lost",
        "task-cancel",
        "task-input",
        "task-report",
        "task-timeout",
    ]
    for skill in bundled.values():
        assert json.loads(skill.descriptor)["capability_type"] == "task"
        assert skill.invoke is not None
        assert skill.invoke.steps[0].task == "submit"


def test_the_polls_are_among_the_sequences_a_skill_may_play() -> None:
    # What looks at every sequence (a WSGI server refusing transport faults, a recording
    # looking for proxies) sees the status URL's too.
    skill = the_skill(task_skill(life(DONE, more="polls: [{fault: EMPTY_RESPONSE}]\n")))
    assert skill.task is not None
    assert skill.task.polls is not None
    assert skill.task.polls in skill.sequences
    assert skill.invoke in skill.sequences


def test_a_server_without_the_raw_socket_refuses_a_fault_on_the_status_url() -> None:
    from mockskill.engine.capabilities import check_playable

    text = task_skill(life(DONE, more="polls: [{fault: EMPTY_RESPONSE}, {task: status}]\n"))
    with pytest.raises(ScenarioError) as caught:
        check_playable(load_text(text, "s.yaml"), raw_socket=False)
    [problem] = caught.value.problems
    assert problem.line == 6  # the poll step's line
    assert "transport fault" in problem.found


# -- callbacks --------------------------------------------------------------------------


def hooked(*keys: str, url: str = "{header: X-Callback-Url}") -> str:
    """A task skill (life: completed) whose ``callback:`` (line 6) has ``url:`` (line 7),
    ``secret: s3cret`` (line 8), then *keys* (block YAML, key i on line 9 + i)."""
    lines = [f"url: {url}", "secret: s3cret", *keys]
    return task_skill(life(DONE, more="callback:\n" + "".join(f"  {k}\n" for k in lines)))


def test_a_callback_loads_into_the_model_as_written() -> None:
    text = hooked(
        "signature_header: X-Signature",
        "attempts: 3",
        "backoff: 500ms",
        "timeout: 2s",
        "on: [completed, working]",
        "fault: [never, none, late]",
        "late_by: 3s",
        url="{body: /callback/url}",
    )
    callback = the_task(text).callback
    assert callback is not None
    assert callback == TaskCallback(
        url_from=("body", "/callback/url"),
        where=callback.where,
        signature_header="X-Signature",
        secret="s3cret",
        attempts=3,
        backoff_ms=500,
        timeout_ms=2000,
        on=("working", "completed"),  # in the order a task reaches them
        faults=("never", "none", "late"),
        late_ms=3000,
    )
    assert (callback.where.file, callback.where.line) == ("s.yaml", 7)


def test_what_a_callback_leaves_out_is_the_contracts_defaults() -> None:
    callback = the_task(hooked()).callback
    assert callback is not None
    assert callback.url_from == ("header", "X-Callback-Url")
    assert callback.secret == "s3cret"
    assert (callback.signature_header, callback.attempts) == ("Mockskill-Signature", 5)
    assert (callback.backoff_ms, callback.timeout_ms, callback.late_ms) == (1000, 5000, 2000)
    assert callback.on == ("working", "input_required", "completed", "failed", "cancelled")
    assert callback.faults == ("none",)


def test_a_task_without_callback_or_with_callback_null_is_polled_only() -> None:
    assert the_task(task_skill(life(DONE))).callback is None
    assert the_task(task_skill(life(DONE, more="callback: null\n"))).callback is None


@pytest.mark.parametrize("fault", CALLBACK_FAULTS)
def test_one_fault_is_every_tasks_fault(fault: str) -> None:
    callback = the_task(hooked(f"fault: {fault}")).callback
    assert callback is not None
    assert callback.faults == (fault,)


def test_a_body_pointer_is_kept_as_written_escapes_and_all() -> None:
    callback = the_task(hooked(url="{body: /hooks/a~1b~0c}")).callback
    assert callback is not None
    assert callback.url_from == ("body", "/hooks/a~1b~0c")


def test_the_bounds_are_inclusive() -> None:
    callback = the_task(hooked("attempts: 100", "backoff: 5m", "timeout: 1ms")).callback
    assert callback is not None
    assert (callback.attempts, callback.backoff_ms, callback.timeout_ms) == (100, 300_000, 1)
    callback = the_task(hooked("attempts: 1")).callback
    assert callback is not None
    assert callback.attempts == 1


def test_a_secret_is_never_shown_back_in_a_problem() -> None:
    text = task_skill(life(DONE, more="callback: {url: {header: X}, secret: 4242}\n"))
    [problem] = problems_in(text)
    assert "4242" not in str(problem)
    assert problem.found == "an integer, not a string"


# (id, text, path, line, token on that line where the problem points, expected, found, hint)
CALLBACK_CASES: list[tuple[str, str, str, int, str, str, str, str]] = [
    (
        "unknown callback key",
        hooked("retries: 3"),
        "skills[0].task.callback.retries",
        9,
        "retries",
        "a known key",
        "unknown key 'retries'",
        "allowed here: url, secret",
    ),
    (
        "misspelt callback key",
        hooked("atempts: 3"),
        "skills[0].task.callback.atempts",
        9,
        "atempts",
        "a known key",
        "unknown key 'atempts'",
        "did you mean 'attempts'?",
    ),
    (
        "unknown url source",
        hooked(url="{heder: X-Callback-Url}"),
        "skills[0].task.callback.url.heder",
        7,
        "heder",
        "a known key",
        "unknown key 'heder'",
        "did you mean 'header'?",
    ),
    (
        "a fixed url",
        hooked(url="'http://127.0.0.1:9000/hook'"),
        "skills[0].task.callback.url",
        7,
        "'http",
        "{header: NAME} or {body: /POINTER}",
        "'http://127.0.0.1:9000/hook' (a string)",
        "the consumer does",
    ),
    (
        "both url sources",
        hooked(url="{header: X-Hook, body: /hook}"),
        "skills[0].task.callback.url",
        7,
        "{",
        "{header: NAME} or {body: /POINTER}",
        "both",
        "keep header: or body:",
    ),
    (
        "an empty url mapping",
        hooked(url="{}"),
        "skills[0].task.callback.url",
        7,
        "{",
        "{header: NAME} or {body: /POINTER}",
        "an empty mapping",
        "",
    ),
    (
        "no url",
        task_skill(life(DONE, more="callback: {secret: s}\n")),
        "skills[0].task.callback",
        6,
        "{",
        "the key 'url'",
        "it missing",
        "url: {header: X-Callback-Url}",
    ),
    (
        "a header name with a space",
        hooked(url="{header: 'X Hook'}"),
        "skills[0].task.callback.url.header",
        7,
        "'X",
        "a header name",
        "'X Hook' (a string)",
        "",
    ),
    (
        "a pointer without its slash",
        hooked(url="{body: callback.url}"),
        "skills[0].task.callback.url.body",
        7,
        "callback.url",
        "a JSON Pointer to the URL in the invoke's body",
        "'callback.url' (a string)",
        "starts with /: /callback/url",
    ),
    (
        "a pointer to the whole body",
        hooked(url="{body: ''}"),
        "skills[0].task.callback.url.body",
        7,
        "''",
        "a JSON Pointer to the URL in the invoke's body",
        "'' (a string)",
        "the whole body",
    ),
    (
        "a pointer with a bad escape",
        hooked(url="{body: /a~2}"),
        "skills[0].task.callback.url.body",
        7,
        "/a~2",
        "a JSON Pointer to the URL in the invoke's body",
        "'/a~2' (a string)",
        "",
    ),
    (
        "no secret",
        task_skill(life(DONE, more="callback: {url: {header: X-Hook}}\n")),
        "skills[0].task.callback",
        6,
        "{",
        "the key 'secret'",
        "it missing",
        "the same secret",
    ),
    (
        "an empty secret",
        task_skill(life(DONE, more="callback: {url: {header: X-Hook}, secret: ' '}\n")),
        "skills[0].task.callback.secret",
        6,
        "' '",
        "a secret: a non-empty string",
        "an empty string",
        "proves nothing",
    ),
    (
        "a secret that is null",
        task_skill(life(DONE, more="callback: {url: {header: X-Hook}, secret: null}\n")),
        "skills[0].task.callback.secret",
        6,
        "null",
        "a secret: a non-empty string",
        "null",
        "quote it",
    ),
    (
        "a signature header every delivery sets",
        hooked("signature_header: Content-Type"),
        "skills[0].task.callback.signature_header",
        9,
        "Content-Type",
        "a header of its own for the signature",
        "Content-Type, which every delivery sets itself",
        "Mockskill-Signature",
    ),
    (
        "a signature header that is no name",
        hooked("signature_header: 'a:b'"),
        "skills[0].task.callback.signature_header",
        9,
        "'a:b'",
        "a header name",
        "'a:b' (a string)",
        "",
    ),
    (
        "no attempts",
        hooked("attempts: 0"),
        "skills[0].task.callback.attempts",
        9,
        "0",
        "a whole number from 1 to 100",
        "0 (an integer)",
        "",
    ),
    (
        "absurd attempts",
        hooked("attempts: 1000"),
        "skills[0].task.callback.attempts",
        9,
        "1000",
        "a whole number from 1 to 100",
        "1000 (an integer)",
        "",
    ),
    (
        "a zero backoff",
        hooked("backoff: 0s"),
        "skills[0].task.callback.backoff",
        9,
        "0s",
        "a duration with its unit",
        "'0s' (a string)",
        "a span of nothing never happens",
    ),
    (
        "a negative timeout",
        hooked("timeout: -1s"),
        "skills[0].task.callback.timeout",
        9,
        "-1s",
        "a duration with its unit",
        "'-1s' (a string)",
        "never negative",
    ),
    (
        "a timeout without its unit",
        hooked("timeout: 5"),
        "skills[0].task.callback.timeout",
        9,
        "5",
        "a duration with its unit",
        "5 (an integer)",
        "write the unit: 5ms or 5s",
    ),
    (
        "a backoff past the longest wait",
        hooked("backoff: 6m"),
        "skills[0].task.callback.backoff",
        9,
        "6m",
        "a duration with its unit",
        "'6m' (a string)",
        "refused, not clamped",
    ),
    (
        "submitted pushed",
        hooked("on: [submitted, completed]"),
        "skills[0].task.callback.on[0]",
        9,
        "submitted",
        "a status a task reaches after its submit",
        "'submitted'",
        "the invoke's 202 answers the submit itself",
    ),
    (
        "an unknown status pushed",
        hooked("on: [working, complete]"),
        "skills[0].task.callback.on[1]",
        9,
        "complete]",
        "one of working, input_required, completed, failed, cancelled",
        "'complete' (a string)",
        "did you mean 'completed'?",
    ),
    (
        "nothing pushed",
        hooked("on: []"),
        "skills[0].task.callback.on",
        9,
        "[]",
        "a list of the statuses to push",
        "a list of 0 items",
        "leave callback: out to push none",
    ),
    (
        "an unknown fault",
        hooked("fault: out-of-order"),
        "skills[0].task.callback.fault",
        9,
        "out-of-order",
        "one of none, twice, late, out_of_order, never, forged",
        "'out-of-order' (a string)",
        "did you mean 'out_of_order'?",
    ),
    (
        "an unknown fault in a list",
        hooked("fault: [none, forge]"),
        "skills[0].task.callback.fault[1]",
        9,
        "forge",
        "one of none, twice",
        "'forge' (a string)",
        "did you mean 'forged'?",
    ),
    (
        "an empty fault list",
        hooked("fault: []"),
        "skills[0].task.callback.fault",
        9,
        "[]",
        "a fault (none, twice",
        "a list of 0 items",
        "",
    ),
    (
        "late_by without late",
        hooked("fault: [none, twice]", "late_by: 3s"),
        "skills[0].task.callback.late_by",
        10,
        "late_by",
        "late_by: only with the late fault",
        "late_by with fault: none, twice",
        "add late to fault:",
    ),
    (
        "late_by with no fault at all",
        hooked("late_by: 3s"),
        "skills[0].task.callback.late_by",
        9,
        "late_by",
        "late_by: only with the late fault",
        "late_by with fault: none",
        "add late to fault:",
    ),
    (
        "callback not a mapping",
        task_skill(life(DONE, more="callback: X-Callback-Url\n")),
        "skills[0].task.callback",
        6,
        "X-Callback-Url",
        "a callback: a mapping with url:",
        "'X-Callback-Url' (a string)",
        "",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "token", "expected", "found", "hint"),
    [pytest.param(*case[1:], id=case[0]) for case in CALLBACK_CASES],
)
def test_a_bad_callback_is_one_positioned_problem(
    text: str, path: str, line: int, token: str, expected: str, found: str, hint: str
) -> None:
    [problem] = problems_in(text)
    assert problem.file == "s.yaml"
    assert_problem(problem, path, line, column(text, line, token), expected, found, hint)


def test_every_problem_of_a_callback_is_reported_at_once() -> None:
    text = hooked(
        "attempts: 0",
        "backoff: 0s",
        "on: [submitted]",
        "fault: [lost, never]",
        "late_by: 1s",
        url="{body: url}",
    )
    paths = sorted(p.path for p in problems_in(text))
    assert paths == sorted(
        f"skills[0].task.callback.{key}"
        for key in ("url.body", "attempts", "backoff", "on[0]", "fault[0]")
    )  # (late_by is not judged against a fault list that is itself wrong)


def test_a_bad_callback_and_a_bad_life_are_reported_together() -> None:
    text = task_skill(
        life("{status: working}", DONE, more="callback: {url: {header: X}, secret: ''}\n")
    )
    assert sorted(p.path for p in problems_in(text)) == [
        "skills[0].task.callback.secret",
        "skills[0].task.life[0]",
    ]


def _callbacks_section() -> str:
    return _section().split("\n### Callbacks\n", 1)[1]


def test_the_docs_callback_problem_lines_are_what_the_loader_says() -> None:
    shown = re.search(r"```text\n(hooks\.yaml:.*?)```", _callbacks_section(), re.DOTALL)
    assert shown is not None
    text = (
        "name: hooks\nskills:\n  - id: export\n    task:\n      life: [{status: completed}]\n"
        "      callback:\n        url: 'http://127.0.0.1:9000/hook'\n        secret: s3cret\n"
        "        on: [submitted, completed]\n        late_by: 3s\n        fault: never\n"
    )
    with pytest.raises(ScenarioError) as caught:
        load_text(text, "hooks.yaml")
    assert [str(p) for p in caught.value.problems] == shown.group(1).splitlines()


def test_the_docs_callback_table_names_every_key_the_loader_reads() -> None:
    from mockskill.scenario import task_callbacks

    table = _callbacks_section().split("A callback:\n\n| key | meaning |\n", 1)[1]
    rows = table.split("\n\n", 1)[0].splitlines()[1:]
    keys = [row.split("|")[1].strip().strip("`") for row in rows]
    assert keys == list(task_callbacks.CALLBACK_KEYS)
    assert all(f"`{fault}`" in _callbacks_section() for fault in CALLBACK_FAULTS)


def test_the_docs_callback_example_loads() -> None:
    example = re.search(r"```yaml\n(name: hooks\n.*?)```", _callbacks_section(), re.DOTALL)
    assert example is not None
    warnings: list[Problem] = []
    [scenario] = load_text(example.group(1), "hooks.yaml", warnings=warnings).scenarios
    assert warnings == []
    [skill] = scenario.skills
    assert skill.task is not None
    assert skill.task.callback is not None
    assert skill.task.callback.faults == ("none", "late")
    assert skill.task.callback.on == ("working", "completed")


def callback_warnings(text: str) -> list[Problem]:
    warnings: list[Problem] = []
    load_text(text, "s.yaml", warnings=warnings)
    return warnings


def test_pushing_a_status_the_life_never_reaches_is_a_positioned_warning() -> None:
    text = hooked("on: [working, completed]")
    [warning] = callback_warnings(text)
    assert (warning.path, warning.line) == ("skills[0].task.callback.on", 9)
    assert warning.found == "'working', which its life never reaches"
    assert callback_warnings(hooked("on: [completed, cancelled]")) == []  # a cancel reaches it
    assert callback_warnings(hooked()) == []  # the default pushes whatever happens


def test_pushing_cancelled_when_no_cancel_is_allowed_is_a_warning() -> None:
    text = task_skill(
        life(
            DONE,
            more="cancel: {allowed: []}\n"
            "callback: {url: {header: X}, secret: s, on: [completed, cancelled]}\n",
        )
    )
    [warning] = callback_warnings(text)
    assert warning.found.startswith("'cancelled'")


@pytest.mark.parametrize(
    ("more", "watch", "heartbeat_ms"),
    [
        ("", True, 15_000),
        ("watch: false\n", False, 15_000),
        ("watch: {heartbeat: 2s}\n", True, 2000),
    ],
    ids=["default", "opted-out", "heartbeat"],
)
def test_a_task_is_watched_unless_it_says_not(more: str, watch: bool, heartbeat_ms: int) -> None:
    task = the_skill(task_skill(life(DONE, more=more))).task
    assert task is not None
    assert (task.watch, task.watch_heartbeat_ms) == (watch, heartbeat_ms)


# -- a case's own life (task_life:) -----------------------------------------------------


def cased(task_life: str, *, steps: str = "[{task: submit}]") -> str:
    """A task skill ``s`` whose invoke has one named case ``c`` (line 8) with *task_life*
    (flow YAML, on line 10) and *steps*."""
    return task_skill(
        life(DONE),
        after=f"""\
        invoke:
          cases:
            - name: c
              when: {{}}
              task_life: {task_life}
              steps: {steps}
          steps: [{{task: submit}}]
        """,
    )


def test_a_cases_task_life_loads_beside_the_skills_life() -> None:
    skill = the_skill(cased("{life: [{status: working, polls: 1}, {status: cancelled}]}"))
    assert skill.task is not None
    assert [p.status for p in skill.task.life] == ["completed"]
    [case] = skill.invoke_cases
    assert case.task is not None
    assert [p.status for p in case.task.life] == ["working", "cancelled"]
    assert case.task.callback is None
    assert case.task.where.line == 10


def test_a_cases_life_pushes_to_the_skills_callback_unless_it_gives_its_own() -> None:
    text = cased("{life: [{status: cancelled}]}").replace(
        "    task:\n",
        "    task:\n      callback: {url: {header: X-Cb}, secret: k, fault: twice}\n",
        1,
    )
    skill = the_skill(text)
    [case] = skill.invoke_cases
    assert skill.task is not None
    assert case.task is not None
    assert case.task.callback == skill.task.callback
    assert case.task.callback is not None
    hook = "{url: {body: /cb}, secret: k, fault: never}"
    own = the_skill(cased(f"{{life: [{{status: cancelled}}], callback: {hook}}}"))
    [case] = own.invoke_cases
    assert own.task is not None
    assert own.task.callback is None
    assert case.task is not None
    assert case.task.callback is not None
    assert case.task.callback.faults == ("never",)


def test_a_case_without_task_life_submits_to_the_skills_life() -> None:
    text = "".join(line for line in cased("null").splitlines(True) if "task_life" not in line)
    [case] = the_skill(text).invoke_cases
    assert case.task is None


LIFE_CASES = [
    (
        "a task_life without life",
        cased("{ttl: 1s}"),
        "skills[0].invoke.cases[0].task_life",
        10,
        "{ttl",
        "the key 'life'",
        "it missing",
    ),
    (
        "a task_life whose case never submits",
        cased("{life: [{status: completed}]}", steps="[{json: {a: 1}}]"),
        "skills[0].invoke.cases[0].task_life",
        10,
        "task_life",
        "a case that submits the task its task_life: scripts",
        "case 'c', whose steps have no task: submit",
    ),
    (
        "a bad callback in a case's life",
        cased(
            "{life: [{status: completed}], callback: {url: {header: X-Cb}, secret: k, fault: lost}}"
        ),
        "skills[0].invoke.cases[0].task_life.callback.fault",
        10,
        "lost",
        "one of none",
        "'lost' (a string)",
    ),
    (
        "a bad phase in a case's life",
        cased("{life: [{status: finished}]}"),
        "skills[0].invoke.cases[0].task_life.life[0].status",
        10,
        "finished",
        "one of submitted",
        "'finished' (a string)",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "token", "expected", "found"),
    [pytest.param(*case[1:], id=case[0]) for case in LIFE_CASES],
)
def test_a_bad_task_life_is_one_positioned_problem(
    text: str, path: str, line: int, token: str, expected: str, found: str
) -> None:
    [problem] = problems_in(text)
    assert (problem.file, problem.path, problem.line) == ("s.yaml", path, line)
    assert problem.column == column(text, line, token)
    assert problem.expected.startswith(expected)
    assert problem.found.startswith(found)


def test_a_task_life_outside_a_task_skills_invoke_is_refused_where_it_is_written() -> None:
    text = textwrap.dedent(
        """\
        skills:
          - id: s
            invoke:
              cases:
                - name: c
                  when: {}
                  task_life: {life: [{status: completed}]}
                  json: {a: 1}
        """
    )
    [problem] = problems_in(text)
    assert (problem.path, problem.line) == ("skills[0].invoke.cases[0].task_life", 7)
    assert problem.column == column(text, 7, "task_life")
    assert problem.expected == "task_life: in a case of a task skill's invoke"
