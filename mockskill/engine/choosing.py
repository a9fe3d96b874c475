"""Which step a request plays: the next of its sequence (or the outage's), and its draws.

A session's position in the sequence and its random generator are the
state's; this module asks for them, on the routing table the request was
matched on, and draws a random step's values in a fixed order so that a
seed replays them.
"""

from __future__ import annotations

import dataclasses
import random

from ..protocol import catalog
from ..scenario.model import Reply, Step
from .actions import Urls
from .matching import RoutingTable, Target
from .replies import exhausted_reply
from .state import State


@dataclasses.dataclass(slots=True)
class Chosen:
    """The step to play and its random values, or (*step* None) the reply instead."""

    step: Step | None = None
    index: int | None = None
    """The step's index in its sequence (None: the outage's, or the sequence is over)."""
    position: int | None = None
    outage: bool = False
    choice: int | None = None
    delay_ms: float | None = None
    execution_ms: float | None = None
    fault_seed: int = 0
    drawn: bool = False
    """Whether the step's values were drawn from the session's generator (it is random)."""
    timeout: tuple[int, int, catalog.Context] | None = None
    reply: Reply | None = None


def choose(state: State, table: RoutingTable, target: Target, session: str, urls: Urls) -> Chosen:
    """*target*'s next step and its random values, all of it on *table* (the one it
    was matched on); or, when the sequence is exhausted, the reply saying so."""
    sequence = target.sequence
    assert sequence is not None
    # Not the live table: a scenario removed or deactivated since the match is not in it.
    name = target.scenario
    scenario = table.scenarios[name] if name else None
    outage = scenario.outage if scenario else None
    index = position = None
    if outage and scenario and outage.covers(state.since_activated(scenario.name) * 1000):
        step, in_outage = outage.step, True
    else:
        key = target.key
        position = state.advance(session, key, table.generations.get(key, 0))
        index = sequence.step_at(position)
        if index is None:
            reply = urls.fill(exhausted_reply(target, session, position))
            return Chosen(position=position, reply=reply)
        step, in_outage = sequence.steps[index], False
    skill = target.skill
    timeout = None
    if skill is not None and skill.timeout_ms is not None:
        timeout = (skill.timeout_ms, skill.timeout_status, target.context)
    if step.random:
        seed = scenario.seed if scenario else None
        drawn = state.draw(session, name or "", seed, lambda rng: _draw(step, rng))
        step, choice, delay_ms, execution_ms, fault_seed = drawn
        return Chosen(
            step,
            index,
            position,
            in_outage,
            choice,
            delay_ms,
            execution_ms,
            fault_seed,
            True,
            timeout,
        )
    # Nothing to draw: no generator is made for the session. Positional: one per request.
    delay_ms = step.delay.draw(_NO_RANDOM) if step.delay else None
    execution_ms = step.execution.draw(_NO_RANDOM) if step.execution else None
    return Chosen(step, index, position, in_outage, None, delay_ms, execution_ms, 0, False, timeout)


_NO_RANDOM = random.Random(0)
"""Handed to fixed delays, which draw nothing from it."""


def _draw(
    step: Step, rng: random.Random
) -> tuple[Step, int | None, float | None, float | None, int]:
    """Every random value a step needs, in a fixed order (so a seed replays it)."""
    choice = None
    if step.choices:
        total = sum(c.weight for c in step.choices)
        roll, choice = rng.random() * total, len(step.choices) - 1
        for i, option in enumerate(step.choices):
            roll -= option.weight
            if roll < 0:
                choice = i
                break
        step = step.choices[choice].step
    delay = round(step.delay.draw(rng), 3) if step.delay else None
    execution = round(step.execution.draw(rng), 3) if step.execution else None
    return step, choice, delay, execution, rng.getrandbits(32)
