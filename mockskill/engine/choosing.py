"""Which step a request plays: the next of its sequence (or the outage's), and its draws.

A session's position in the sequence, the outage clock and the session's
draw count are the store's: :func:`take` says what to take of them (a
:class:`~.store.Take`, on the routing table the request was matched on) and
:func:`chosen` reads what was taken. Both are pure. A random step's values
are drawn from a generator seeded by :func:`generator` from the seed, the
scenario, the session and the draw number, in a fixed order: the same seed
and the same requests replay the same values, whichever process serves each.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random

from ..protocol import catalog
from ..scenario.model import Reply, Step
from .actions import Urls
from .matching import RoutingTable, Target
from .replies import exhausted_reply
from .store import Take, Taken


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


def take(table: RoutingTable, target: Target, session: str) -> Take:
    """What *target*'s next request in *session* takes of the store, on *table* (the one
    it was matched on: a scenario removed or deactivated since the match is not in it)."""
    name = target.scenario or ""
    key = target.key
    generation = table.generations.get(key, 0)
    scenario = table.scenarios[name] if name else None
    outage = scenario.outage if scenario else None
    if outage is None:
        return Take(session, key, generation, name, None, target.draws)
    window = (float(outage.start_ms), float(outage.start_ms + outage.duration_ms))
    return Take(session, key, generation, name, window, target.draws or outage.step.random)


def chosen(
    table: RoutingTable, target: Target, session: str, urls: Urls, taken: Taken, seed: int
) -> Chosen:
    """*target*'s step and its random values, as *taken* (the answer to :func:`take`), all
    of it on *table*; or, when the sequence is exhausted, the reply saying so. *seed* is the
    server's: a scenario's own wins."""
    sequence = target.sequence
    assert sequence is not None
    name = target.scenario
    index = None
    position = taken.position
    if position is None:  # in the scenario's outage
        scenario = table.scenarios[name] if name else None
        assert scenario is not None
        assert scenario.outage is not None
        step, in_outage = scenario.outage.step, True
    else:
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
        scenario = table.scenarios[name] if name else None
        if scenario is not None and scenario.seed is not None:
            seed = scenario.seed
        rng = generator(seed, name or "", session, taken.draw)
        step, choice, delay_ms, execution_ms, fault_seed = _draw(step, rng)
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
    # Nothing to draw: no generator is made. Positional: one per request.
    delay_ms = step.delay.draw(_NO_RANDOM) if step.delay else None
    execution_ms = step.execution.draw(_NO_RANDOM) if step.execution else None
    return Chosen(step, index, position, in_outage, None, delay_ms, execution_ms, 0, False, timeout)


def generator(seed: int, stream: str, session: str, draw: int) -> random.Random:
    """The generator of draw number *draw* of *session* in *stream* (a scenario's name).

    A pure function of its arguments, so any process makes the same one: the
    store only counts the draws. The names are length-prefixed, so that no two
    (stream, session) pairs read alike; the seed is the first 128 bits of
    their BLAKE2b digest, as an int (``random.Random(str)`` would hash the
    string with SHA-512 first: slower, no better mixed).
    """
    text = f"{seed}:{len(stream)}:{stream}:{len(session)}:{session}:{draw}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return random.Random(int.from_bytes(digest, "big"))


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
