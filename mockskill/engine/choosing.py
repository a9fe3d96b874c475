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
    assert target.sequence is not None
    # Not the live table: a scenario removed or deactivated since the match is not in it.
    scenario = table.scenarios[target.scenario] if target.scenario else None
    seed = scenario.seed if scenario else None
    outage = scenario.outage if scenario else None
    chosen = Chosen()
    if outage and scenario and outage.covers(state.since_activated(scenario.name) * 1000):
        step, chosen.outage = outage.step, True
    else:
        generation = table.generations.get(target.key, 0)
        position = state.advance(session, target.key, generation)
        index = target.sequence.step_at(position)
        chosen.position, chosen.index = position, index
        if index is None:
            chosen.reply = urls.fill(exhausted_reply(target, session, position))
            return chosen
        step = target.sequence.steps[index]
    if step.random:
        chosen.drawn = True
        step, chosen.choice, chosen.delay_ms, chosen.execution_ms, chosen.fault_seed = state.draw(
            session, target.scenario or "", seed, lambda rng: _draw(step, rng)
        )
    else:  # nothing to draw: no generator is made for the session
        chosen.delay_ms = step.delay.draw(_NO_RANDOM) if step.delay else None
        chosen.execution_ms = step.execution.draw(_NO_RANDOM) if step.execution else None
    skill = target.skill
    if skill is not None and skill.timeout_ms is not None:
        chosen.timeout = (skill.timeout_ms, skill.timeout_status, target.context)
    chosen.step = step
    return chosen


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
